package membership

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
)

// ReadSecretKeys reads gossip encryption keys from path (typically a
// mounted Secret); see ParseSecretKeys for the format.
func ReadSecretKeys(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("membership: secret key: %w", err)
	}
	return ParseSecretKeys(data, "file "+path)
}

// ParseSecretKeys reads the keys in data, where names their origin in
// errors. data holds one key, base64-encoded (what `openssl rand -base64
// 32` prints) or as raw bytes, or several base64 keys one per line: the
// first encrypts, every one decrypts, which is how a key is rotated
// without a split (docs/hardening.md). Surrounding whitespace is ignored.
// Content that decodes as base64 to 16, 24 or 32 bytes is taken as base64,
// anything else of such a length as raw bytes, so every node reading the
// same data gets the same keys.
func ParseSecretKeys(data []byte, where string) ([][]byte, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, fmt.Errorf("membership: secret key %s is empty", where)
	}
	if key, ok := decodeKey(data); ok {
		return [][]byte{key}, nil
	}
	if checkKeyLen(len(data)) == nil {
		return [][]byte{data}, nil
	}
	var lines [][]byte
	for _, l := range bytes.Split(data, []byte("\n")) {
		if l = bytes.TrimSpace(l); len(l) > 0 {
			lines = append(lines, l)
		}
	}
	if len(lines) == 1 {
		if b, err := base64.StdEncoding.DecodeString(string(data)); err == nil {
			return nil, fmt.Errorf("membership: secret key %s: base64 of a %w", where, checkKeyLen(len(b)))
		}
		return nil, fmt.Errorf("membership: secret key %s: %w (or that many bytes base64-encoded)", where, checkKeyLen(len(data)))
	}
	keys := make([][]byte, 0, len(lines))
	for i, line := range lines {
		key, ok := decodeKey(line)
		if !ok {
			return nil, fmt.Errorf("membership: secret key %s: line %d is not a base64 key of 16, 24 or 32 bytes", where, i+1)
		}
		keys = append(keys, key)
	}
	return keys, nil
}

func decodeKey(b []byte) ([]byte, bool) {
	key, err := base64.StdEncoding.DecodeString(string(b))
	return key, err == nil && checkKeyLen(len(key)) == nil
}

// checkKeyLen accepts the AES-128, AES-192 and AES-256 key sizes that
// memberlist supports.
func checkKeyLen(n int) error {
	switch n {
	case 16, 24, 32:
		return nil
	}
	return fmt.Errorf("key is %d bytes, want 16, 24 or 32", n)
}
