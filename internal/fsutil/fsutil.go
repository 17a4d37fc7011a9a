// Package fsutil reads the files sources watch either from the host or,
// in tests and for the embedded demo, from an fs.FS.
package fsutil

import (
	"io/fs"
	"os"
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
