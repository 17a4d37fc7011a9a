package httpapi

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"net/http"
	"sync"
)

// ringView is /debug/ring/view: one page, its script and style inline,
// that reads /debug/ring every 1.5 s and draws it. It loads nothing from
// elsewhere, so it works on a node with no way out, and nothing the
// cluster names is parsed as HTML (the script sets text only).
//
//go:embed ringview.html
var ringView []byte

// ringViewPolicy is the Content-Security-Policy of ringView: its own
// inline script and style (by hash) and requests to this server only. A
// name that slipped through as markup could then run nothing.
var ringViewPolicy = sync.OnceValue(func() string {
	return "default-src 'none'; script-src " + inlineHash(ringView, "<script>", "</script>") +
		"; style-src " + inlineHash(ringView, "<style>", "</style>") +
		"; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
})

// inlineHash is the CSP source of the first element of page opened by
// open and closed by end: its content's SHA-256.
func inlineHash(page []byte, open, end string) string {
	_, rest, _ := bytes.Cut(page, []byte(open))
	body, _, _ := bytes.Cut(rest, []byte(end))
	sum := sha256.Sum256(body)
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

func (s *Server) serveRingView(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", ringViewPolicy())
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	w.Write(ringView)
}
