package node

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// unmapBinaryPages unmaps the pages of this program's code and read-only
// data, as the memory releaser returns freed memory: after the start's
// sync, a ring change's loads and handoffs, a reload, a burst of changes.
// The kernel maps a binary's cached pages 64 KB at a time around each
// one a program touches, so the start (every package's init, the
// configuration, the first lists) leaves about 20 MB of the binary
// mapped, half of an idle replica's RSS, and a handoff maps its own
// code likewise; most of it is not used again until the next such
// burst. What serving touches afterwards is mapped again from the page
// cache, a minor fault for each 64 KB once; the rest stays in the page
// cache as long as the kernel has no better use for it.
//
// Only mappings of the executable that hold nothing but the file's
// pages are unmapped: read-only or executable, private, and with no
// page of their own (smaps' Anonymous is 0). A page written since it
// was mapped (relocations a dynamic loader applied before making it
// read-only, a debugger's or uprobe's breakpoint) would read back as
// the file has it, so a mapping holding one is left whole. It returns
// the resident bytes unmapped.
func unmapBinaryPages() (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, err
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	var dropped int64
	for _, m := range fileOnlyMappings(smaps, exe) {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, unix.MADV_DONTNEED); errno != 0 {
			return dropped, fmt.Errorf("madvise %x-%x: %w", m.start, m.end, errno)
		}
		dropped += m.rss
	}
	return dropped, nil
}

// mapping is one mapping of /proc/self/smaps that unmapBinaryPages may
// drop, with its resident bytes.
type mapping struct {
	start, end uintptr
	rss        int64
}

// fileOnlyMappings returns the read-only and executable private
// mappings of exe in smaps that hold no page of their own.
func fileOnlyMappings(smaps []byte, exe string) []mapping {
	var out []mapping
	var cur *mapping
	anonymous := false
	flush := func() {
		if cur != nil && !anonymous {
			out = append(out, *cur)
		}
		cur, anonymous = nil, false
	}
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if key, ok := strings.CutSuffix(fields[0], ":"); ok {
			if cur == nil || len(fields) < 2 {
				continue
			}
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			switch key {
			case "Rss":
				cur.rss = kb << 10
			case "Anonymous":
				anonymous = anonymous || kb != 0
			}
			continue
		}
		flush() // a mapping's first line: address range, perms, offset, dev, inode, path
		if len(fields) < 6 || strings.Join(fields[5:], " ") != exe || (fields[1] != "r--p" && fields[1] != "r-xp") {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil || end <= start {
			continue
		}
		cur = &mapping{start: uintptr(start), end: uintptr(end)}
	}
	flush()
	return out
}
