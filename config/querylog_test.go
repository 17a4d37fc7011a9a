package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseQueryLog(t *testing.T) {
	cfg, err := Parse([]byte("kubernetes: {enabled: false}\nlog: {queries: true, queryNames: [Cluster.Local, \".\"], " +
		"queryClasses: [denial, error], queryFormat: \"{common}\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := LogConfig{Level: "info", Format: "text", Errors: true, Queries: true, QueryNames: []string{"cluster.local.", "."},
		QueryClasses: []string{"denial", "error"}, QueryFormat: "{common}"}
	if !reflect.DeepEqual(cfg.Log, want) {
		t.Fatalf("log %+v\nwant %+v", cfg.Log, want)
	}
}

func TestParseQueryLogRejects(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"a class CoreDNS does not have", "log: {queries: true, queryClasses: [nodata]}\n",
			`log.queryClasses: must be all, success, denial or error, got "nodata"`},
		{"a name that is not one", "log: {queries: true, queryNames: [\"a..b\"]}\n", `log.queryNames[0]: "a..b" is not a domain name`},
		{"a format for a log that is off", "log: {queryFormat: \"{name}\"}\n", "log.queries: is false"},
		{"a chain's class", "servers: [{listen: [\"127.0.0.1:5300\"], chain: {log: {queries: true, queryClasses: [x]}}}]\n",
			"servers[0].chain.log.queryClasses"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte("kubernetes: {enabled: false}\n" + c.yaml))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}
