package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadsTheFileOnEveryRequest(t *testing.T) {
	f := filepath.Join(t.TempDir(), "guide.md")
	if err := os.WriteFile(f, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler(f))
	defer srv.Close()
	for _, want := range []string{"one", "two"} {
		if err := os.WriteFile(f, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post(srv.URL+"/read", "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"content":"`+want+`"`) {
			t.Fatalf("%d %s, want content %q", resp.StatusCode, body, want)
		}
	}
	os.Remove(f)
	resp, err := http.Post(srv.URL+"/read", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Fatalf("missing file: status %d", resp.StatusCode)
	}
}
