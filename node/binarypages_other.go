//go:build !linux

package node

// unmapBinaryPages does nothing where there is no /proc/self/smaps to tell
// which mappings hold only the binary's pages.
func unmapBinaryPages() (int64, error) { return 0, nil }
