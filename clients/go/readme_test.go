package taskgate_test

// The README's whole programs are the examples that `go run ./examples/…`
// runs: a reader who copies one gets the other.

import (
	"os"
	"strings"
	"testing"
)

func TestReadmeQuickstartIsTheExample(t *testing.T) {
	readmeProgramIsExample(t, "A whole program (", "examples/quickstart/main.go")
}

func TestReadmeWebhookReceiverIsTheExample(t *testing.T) {
	readmeProgramIsExample(t, "A whole\nreceiver (", "examples/webhooks/main.go")
}

// readmeProgramIsExample checks that the first Go code block after the
// README's paragraph starting with lead is the file example.
func readmeProgramIsExample(t *testing.T, lead, example string) {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	i := strings.Index(s, lead)
	if i < 0 {
		t.Fatalf("README.md has no %q paragraph", lead)
	}
	start := strings.Index(s[i:], "```go\n")
	if start < 0 {
		t.Fatalf("no Go code block after the README's %q", lead)
	}
	block := s[i+start+len("```go\n"):]
	end := strings.Index(block, "\n```\n")
	if end < 0 {
		t.Fatalf("the README's program after %q has no end", lead)
	}
	if got := block[:end+1]; got != string(want) {
		t.Fatalf("the README's program after %q differs from %s:\n--- README\n%s\n--- example\n%s", lead, example, got, want)
	}
}
