package node

import (
	"os"
	"slices"
	"testing"
)

// Only the executable's read-only and executable private mappings that
// hold nothing but the file's pages are dropped.
func TestFileOnlyMappings(t *testing.T) {
	smaps := `00400000-01000000 r-xp 00000000 fd:01 42 /usr/bin/shardns
Size:              12288 kB
Rss:                8192 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
01000000-01800000 r--p 00c00000 fd:01 42 /usr/bin/shardns
Rss:                4096 kB
Anonymous:             0 kB
01800000-01900000 r--p 01400000 fd:01 42 /usr/bin/shardns
Rss:                 512 kB
Anonymous:             4 kB
01900000-01a00000 rw-p 01500000 fd:01 42 /usr/bin/shardns
Rss:                 256 kB
Anonymous:             0 kB
01a00000-01b00000 rw-p 00000000 00:00 0
Rss:                1024 kB
Anonymous:          1024 kB
7f0000000000-7f0000100000 r-xp 00000000 fd:01 77 /usr/lib/libc.so.6
Rss:                 900 kB
Anonymous:             0 kB
7f0000200000-7f0000300000 r-xp 00000000 fd:01 78 /usr/bin/shardns (deleted)
Rss:                  64 kB
Anonymous:             0 kB
`
	got := fileOnlyMappings([]byte(smaps), "/usr/bin/shardns")
	want := []mapping{{0x400000, 0x1000000, 8192 << 10}, {0x1000000, 0x1800000, 4096 << 10}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if got := fileOnlyMappings([]byte(smaps), "/usr/bin/shardns (deleted)"); len(got) != 1 || got[0].start != 0x7f0000200000 {
		t.Fatalf("a replaced binary's mapping: %+v", got)
	}
	if got := fileOnlyMappings([]byte("garbage\n-\nRss: 5 kB\n"), "/usr/bin/shardns"); len(got) != 0 {
		t.Fatalf("from garbage: %+v", got)
	}
}

// Unmapping this test binary's pages unmaps them, and the program
// goes on running from the pages mapped again.
func TestUnmapBinaryPages(t *testing.T) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Skip(err)
	}
	resident := func() (n int64) {
		smaps, err := os.ReadFile("/proc/self/smaps")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range fileOnlyMappings(smaps, exe) {
			n += m.rss
		}
		return n
	}
	before := resident()
	dropped, err := unmapBinaryPages()
	if err != nil {
		t.Fatal(err)
	}
	after := resident()
	if before == 0 || dropped == 0 || after >= before {
		t.Fatalf("resident %d bytes before, %d after dropping %d", before, after, dropped)
	}
	t.Logf("resident %d KB before, %d KB after", before>>10, after>>10)
}
