package taskgate_test

// The README's whole program is the example that `go run ./examples/quickstart`
// runs: a reader who copies one gets the other.

import (
	"os"
	"strings"
	"testing"
)

func TestReadmeQuickstartIsTheExample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("examples/quickstart/main.go")
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	i := strings.Index(s, "A whole program (")
	if i < 0 {
		t.Fatal(`README.md has no "A whole program (" paragraph`)
	}
	start := strings.Index(s[i:], "```go\n")
	if start < 0 {
		t.Fatal("no Go code block after the README's \"A whole program\"")
	}
	block := s[i+start+len("```go\n"):]
	end := strings.Index(block, "\n```\n")
	if end < 0 {
		t.Fatal("the README's whole program has no end")
	}
	if got, want := block[:end+1], string(example); got != want {
		t.Fatalf("the README's whole program differs from examples/quickstart/main.go:\n--- README\n%s\n--- example\n%s", got, want)
	}
}
