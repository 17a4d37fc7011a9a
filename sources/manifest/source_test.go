package manifest

import (
	"io"
	"log/slog"
	"testing"
	"testing/fstest"

	"github.com/shardns/shardns/model"
)

// A file written in place can be read empty, or cut short, between its
// truncation and its write. The source takes a change only once two
// ticks in a row read the same bytes: a read in between changes nothing,
// and a file that ends up broken keeps the last good objects serving.
func TestReloadWaitsForTheFileToSettle(t *testing.T) {
	const file = "cluster.yaml"
	web := "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop}\nspec: {clusterIP: 10.96.0.10, ports: [{name: http, port: 80}]}\n"
	db := "---\napiVersion: v1\nkind: Service\nmetadata: {name: db, namespace: shop}\nspec: {clusterIP: 10.96.0.11, ports: [{name: sql, port: 5432}]}\n"
	fsys := fstest.MapFS{file: {Data: []byte(web)}}
	initial, err := Load(fsys, []string{file})
	if err != nil {
		t.Fatal(err)
	}
	s := &Source{cfg: Config{Files: []string{file}, FS: fsys, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, served: initial}
	tick := func(content string) []model.Change {
		fsys[file] = &fstest.MapFile{Data: []byte(content)}
		return s.reload()
	}
	serves := func(name string) bool {
		_, ok := s.served.objects[model.Key{Kind: model.KindService, Namespace: "shop", Name: name}]
		return ok
	}

	if changes := tick(web); len(changes) != 0 {
		t.Fatalf("an unchanged file sent %v", changes)
	}
	if changes := tick(""); len(changes) != 0 || !serves("web") {
		t.Fatalf("a file read empty once sent %v", changes)
	}
	if changes := tick(web + db); len(changes) != 0 {
		t.Fatalf("a change read once sent %v", changes)
	}
	changes := tick(web + db)
	if len(changes) != 1 || changes[0].Key.Name != "db" || changes[0].Object == nil {
		t.Fatalf("a change read twice sent %v, want db added", changes)
	}

	// Truncated, then rewritten broken: nothing is deleted, the broken
	// file is not served, and web and db still are.
	broken := web + db + "---\nkind: Service\nmetadata: {name: bad, namespace: shop}\nspec: {clusterIP: nope}\n"
	for _, content := range []string{"", broken, broken, broken} {
		if changes := tick(content); len(changes) != 0 {
			t.Fatalf("reading %q sent %v", content, changes)
		}
	}
	if !serves("web") || !serves("db") {
		t.Fatal("a broken file took objects away")
	}
	if s.lastErr == "" {
		t.Fatal("the broken file's error was not kept for the log")
	}

	// Emptied on purpose, and left so: everything goes.
	tick("")
	if changes := tick(""); len(changes) != 3 { // the namespace shop, web and db
		t.Fatalf("an emptied file sent %v, want three deletes", changes)
	}
}
