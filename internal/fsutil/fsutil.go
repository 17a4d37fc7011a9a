// Package fsutil reads the files sources watch either from the host or,
// in tests and for the embedded demo, from an fs.FS.
package fsutil

import (
	"io/fs"
	"os"
	"time"
)

// ReadFile reads name from fsys, or from the host's file system when
// fsys is nil (paths as the config gives them, absolute or relative).
func ReadFile(fsys fs.FS, name string) ([]byte, error) {
	if fsys == nil {
		return os.ReadFile(name)
	}
	return fs.ReadFile(fsys, name)
}

// Stat is ReadFile's os.Stat.
func Stat(fsys fs.FS, name string) (fs.FileInfo, error) {
	if fsys == nil {
		return os.Stat(name)
	}
	return fs.Stat(fsys, name)
}

// Settling holds back the reading of a changed file until it is whole. A
// file written in place (truncated, then written) is empty or cut short
// for a moment: read then, it would serve too little, or, when the edit
// is broken, be kept as the last good version.
type Settling struct {
	time time.Time // the modification time and size the last check saw
	size int64
}

// Ready reports whether a file found changed, whose stat is st and which
// is checked every interval, may be read now: when it was modified at
// least interval ago, or when the check before found it as it is.
func (s *Settling) Ready(st fs.FileInfo, interval time.Duration) bool {
	if st.ModTime().Equal(s.time) && st.Size() == s.size {
		return true
	}
	// A time in the future (another host's clock) says nothing of age.
	if age := time.Since(st.ModTime()); age >= interval && age >= 0 {
		return true
	}
	s.time, s.size = st.ModTime(), st.Size()
	return false
}
