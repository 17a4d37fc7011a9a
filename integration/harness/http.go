package harness

import (
	"io"
	"net/http"
	"testing"
)

// HTTPStatus is the status of a GET of url; t fails without a response.
func HTTPStatus(t testing.TB, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
