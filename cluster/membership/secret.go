package membership

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
)

// ReadSecretKey reads a gossip encryption key from path (typically a
// mounted Secret). The file holds the key base64-encoded (what `openssl
// rand -base64 32` prints) or as raw bytes; surrounding whitespace is
// ignored. Content that decodes as base64 to 16, 24 or 32 bytes is taken
// as base64, anything else as raw bytes, so every node reading the same
// file gets the same key.
func ReadSecretKey(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("membership: secret key: %w", err)
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, fmt.Errorf("membership: secret key file %s is empty", path)
	}
	if key, err := base64.StdEncoding.DecodeString(string(data)); err == nil && checkKeyLen(len(key)) == nil {
		return key, nil
	}
	if err := checkKeyLen(len(data)); err != nil {
		return nil, fmt.Errorf("membership: secret key file %s: %w (or that many bytes base64-encoded)", path, err)
	}
	return data, nil
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
