package main

import (
	"bytes"
	"os"
	"testing"
)

// The committed types_gen.go is what the generator makes of the committed
// document: regenerate (`go generate ./...`) after the document changes.
func TestGeneratedCodeIsUpToDate(t *testing.T) {
	data, err := os.ReadFile("../../../openapi.json")
	if err != nil {
		t.Skipf("no document: %v", err)
	}
	doc, err := parseJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	want, err := generate(doc, "../openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	again, err := generate(doc, "../openapi.json")
	if err != nil || !bytes.Equal(want, again) {
		t.Fatalf("two runs differ (err %v)", err)
	}
	got, err := os.ReadFile("../../types_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("types_gen.go is not what the generator makes of ../openapi.json: run `go generate ./...` in clients/go")
	}
}

func TestGoName(t *testing.T) {
	for in, want := range map[string]string{
		"duration_ms": "DurationMS", "key_id": "KeyID", "http_status": "HTTPStatus", "cost_usd": "CostUSD",
		"api": "API", "next_cursor": "NextCursor", "rate_limited_upstream": "RateLimitedUpstream",
	} {
		if got := goName(in); got != want {
			t.Errorf("goName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLookup(t *testing.T) {
	doc, err := parseJSON([]byte(`{"a/b": {"list": [{"name": "x", "v": 1}, {"name": "page", "v": 2}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	n, err := doc.lookup("/a~1b/list/name=page/v")
	if err != nil || n.scalar.(interface{ String() string }).String() != "2" {
		t.Fatalf("lookup: %v %v", n, err)
	}
	if _, err := doc.lookup("/a~1b/list/name=nope"); err == nil {
		t.Fatal("lookup of a missing item succeeded")
	}
}
