package taskgate_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"testing"

	taskgate "github.com/taskgate/taskgate/clients/go"
)

// env returns an environment variable that scripts/with-server.sh sets.
// Without it the test is skipped, unless CI=true: then it fails, so that
// nothing is skipped in CI.
func env(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set: run the tests through scripts/with-server.sh", name)
		}
		t.Skipf("%s is not set: run the tests through scripts/with-server.sh for a live server", name)
	}
	return v
}

// live returns a client of the live server with the key in the named
// environment variable.
func live(t *testing.T, keyVar string, opts ...taskgate.Option) *taskgate.Client {
	t.Helper()
	base := env(t, "TASKGATE_BASE_URL")
	key := env(t, keyVar)
	return taskgate.NewClient(key, append([]taskgate.Option{taskgate.WithBaseURL(base)}, opts...)...)
}

// unique returns a fresh random string, to find a test's own tasks.
func unique(t *testing.T) string {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return t.Name() + "-" + hex.EncodeToString(b[:])
}

// writeEnvelope answers as the service does.
func writeEnvelope(w http.ResponseWriter, status int, data any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Id", "req_stub")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"success": true, "data": data,
		"meta": map[string]any{"request_id": "req_stub", "latency_ms": 0.1},
	})
}

// writeError answers with the service's error envelope.
func writeError(w http.ResponseWriter, status int, typ, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Id", "req_stub_error")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"success": false, "data": nil,
		"error": map[string]any{"type": typ, "code": code, "message": message},
		"meta":  map[string]any{"request_id": "req_stub_error", "latency_ms": 0.1},
	})
}

// stubTask is a finished task as the service writes it.
func stubTask(id string) map[string]any {
	return map[string]any{
		"id": id, "object": "task", "api": "sentiment", "mode": "live", "status": "succeeded",
		"output": map[string]any{"label": "positive", "score": 0.9}, "error": nil,
		"usage":    map[string]any{"units": 1, "input_tokens": nil, "output_tokens": nil, "cost_usd": "0.000100"},
		"metadata": map[string]any{}, "created_at": "2026-11-21T13:45:12.345Z",
		"started_at": "2026-11-21T13:45:12.345Z", "completed_at": "2026-11-21T13:45:12.348Z", "duration_ms": 3,
	}
}
