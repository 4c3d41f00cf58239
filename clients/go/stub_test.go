package taskgate_test

// Tests against small local stub servers: what the real server cannot be
// made to do on demand (a 5xx, a short Retry-After, a dropped answer).

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	taskgate "github.com/taskgate/taskgate/clients/go"
)

// stub starts a server with handler and a client of it.
func stub(t *testing.T, handler http.HandlerFunc, opts ...taskgate.Option) *taskgate.Client {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return taskgate.NewClient("tg_stub_key", append([]taskgate.Option{taskgate.WithBaseURL(srv.URL + "/api/v1/")}, opts...)...)
}

func TestRetried429HonoursRetryAfter(t *testing.T) {
	var calls atomic.Int32
	var mu sync.Mutex
	var first, second time.Time
	c := stub(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if calls.Add(1) == 1 {
			first = time.Now()
			w.Header().Set("Retry-After", "1")
			w.Header().Set("X-RateLimit-Limit", "60")
			w.Header().Set("X-RateLimit-Remaining", "0")
			writeError(w, 429, "rate_limit_error", "rate_limit_exceeded", "slow down")
			return
		}
		second = time.Now()
		w.Header().Set("X-RateLimit-Limit", "60")
		w.Header().Set("X-RateLimit-Remaining", "59")
		w.Header().Set("X-RateLimit-Reset", "1795497247")
		writeEnvelope(w, 200, stubTask("task_a"))
	})
	task, err := c.Tasks.Retrieve(context.Background(), "task_a")
	if err != nil {
		t.Fatal(err)
	}
	if task.ID != "task_a" || calls.Load() != 2 {
		t.Fatalf("task %q after %d requests", task.ID, calls.Load())
	}
	mu.Lock()
	gap := second.Sub(first)
	mu.Unlock()
	if gap < 900*time.Millisecond {
		t.Fatalf("retried after %v, before the Retry-After of 1 s", gap)
	}
	rl := c.LastRateLimit()
	if rl.Limit != 60 || rl.Remaining != 59 || rl.Reset.Unix() != 1795497247 || !rl.Present() {
		t.Fatalf("rate limit of the last answer: %+v", rl)
	}
	if c.LastRequestID() != "req_stub" {
		t.Fatalf("last request id %q", c.LastRequestID())
	}
}

func TestRetryAfterOverAMinuteIsNotWaited(t *testing.T) {
	var calls atomic.Int32
	c := stub(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Retry-After", "120")
		writeError(w, 429, "rate_limit_error", "rate_limit_exceeded", "slow down")
	})
	_, err := c.APIs.Get(context.Background(), "sentiment")
	var e *taskgate.Error
	if !errors.As(err, &e) || !taskgate.IsRateLimited(err) || e.RetryAfter != 120*time.Second {
		t.Fatalf("want a 429 with RetryAfter 120 s, got %v", err)
	}
	if calls.Load() != 1 {
		t.Fatalf("%d requests, want 1 (no retry)", calls.Load())
	}
}

func TestServerErrorsAreRetriedThenRaised(t *testing.T) {
	var calls atomic.Int32
	c := stub(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		writeError(w, 500, "api_error", "internal_error", "An internal error occurred.")
	}, taskgate.WithMaxRetries(1))
	_, err := c.Tasks.Get(context.Background(), "task_a")
	var e *taskgate.Error
	if !errors.As(err, &e) {
		t.Fatalf("want *taskgate.Error, got %T %v", err, err)
	}
	if !taskgate.IsInternal(err) || e.StatusCode != 500 || e.Code != "internal_error" || e.Type != "api_error" || e.RequestID != "req_stub_error" {
		t.Fatalf("error %+v", e)
	}
	if calls.Load() != 2 {
		t.Fatalf("%d requests, want 2 (1 retry)", calls.Load())
	}
}

func TestErrorWithoutEnvelope(t *testing.T) {
	c := stub(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(502)
		io.WriteString(w, "<html>bad gateway</html>")
	}, taskgate.WithMaxRetries(0))
	_, err := c.Tasks.Get(context.Background(), "task_a")
	var e *taskgate.Error
	if !errors.As(err, &e) || e.StatusCode != 502 || !taskgate.IsInternal(err) {
		t.Fatalf("want a 502 *taskgate.Error, got %v", err)
	}
}

func TestOtherStatusIsTheBaseError(t *testing.T) {
	c := stub(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "GET")
		writeError(w, 405, "invalid_request_error", "method_not_allowed", "no")
	})
	_, err := c.Tasks.Get(context.Background(), "task_a")
	var e *taskgate.Error
	if !errors.As(err, &e) || e.StatusCode != 405 || e.Code != "method_not_allowed" {
		t.Fatalf("want a 405 *taskgate.Error, got %v", err)
	}
	for _, is := range []func(error) bool{taskgate.IsBadRequest, taskgate.IsNotFound, taskgate.IsInternal, taskgate.IsConnectionError} {
		if is(err) {
			t.Fatalf("a 405 matched a helper of another status: %v", err)
		}
	}
}

func TestIdempotencyInProgressIsRetried(t *testing.T) {
	var calls atomic.Int32
	c := stub(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "0")
			writeError(w, 409, "conflict_error", "idempotency_in_progress", "wait")
			return
		}
		writeEnvelope(w, 200, stubTask("task_b"))
	})
	task, err := c.Call(context.Background(), taskgate.CallParams{API: "sentiment", Input: map[string]any{"text": "hi"}})
	if err != nil || task.ID != "task_b" || calls.Load() != 2 {
		t.Fatalf("task %v, err %v, %d requests", task, err, calls.Load())
	}
}

func TestConflictOtherThanInProgressIsNotRetried(t *testing.T) {
	var calls atomic.Int32
	c := stub(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		writeError(w, 409, "conflict_error", "task_not_cancellable", "done already")
	})
	_, err := c.Tasks.Cancel(context.Background(), "task_a")
	if !taskgate.IsConflict(err) || calls.Load() != 1 {
		t.Fatalf("err %v after %d requests", err, calls.Load())
	}
}

// The pattern of the Idempotency-Key header in the OpenAPI document, and a
// UUID version 4.
var (
	idempotencyKeyPattern = regexp.MustCompile(`^[!-~]([ -~]*[!-~])?$`)
	uuidV4                = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
)

func TestCallGeneratesOneIdempotencyKeyForItsRetries(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	var bodies []string
	c := stub(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		bodies = append(bodies, string(b))
		n := len(keys)
		mu.Unlock()
		if n == 1 {
			writeError(w, 503, "api_error", "service_unavailable", "draining")
			return
		}
		writeEnvelope(w, 200, stubTask("task_c"))
	})
	if _, err := c.Call(context.Background(), taskgate.CallParams{API: "sentiment", Input: map[string]any{"text": "hi"}}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(keys) != 2 || keys[0] != keys[1] || bodies[0] != bodies[1] {
		t.Fatalf("keys %q, bodies %q: want one key and one body on both attempts", keys, bodies)
	}
	if !uuidV4.MatchString(keys[0]) || !idempotencyKeyPattern.MatchString(keys[0]) {
		t.Fatalf("generated key %q is not a UUID v4", keys[0])
	}
	if want := `{"api":"sentiment","input":{"text":"hi"}}`; bodies[0] != want {
		t.Fatalf("body %s, want %s", bodies[0], want)
	}
}

func TestCallWithoutRetriesSendsNoKeyAndIsNotRetried(t *testing.T) {
	var calls atomic.Int32
	var key atomic.Value
	c := stub(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		key.Store(r.Header.Get("Idempotency-Key"))
		writeError(w, 503, "api_error", "service_unavailable", "draining")
	}, taskgate.WithMaxRetries(0))
	_, err := c.Call(context.Background(), taskgate.CallParams{API: "sentiment", Input: map[string]any{"text": "hi"}})
	if !taskgate.IsInternal(err) || calls.Load() != 1 || key.Load() != "" {
		t.Fatalf("err %v after %d requests with key %q", err, calls.Load(), key.Load())
	}
}

func TestCallSendsTheCallersKeyAndEveryParameter(t *testing.T) {
	var mu sync.Mutex
	var got *http.Request
	var body string
	c := stub(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		got, body = r, string(b)
		writeEnvelope(w, 202, stubTask("task_d"))
	})
	_, err := c.Call(context.Background(), taskgate.CallParams{
		API: "sentiment", Input: map[string]any{"text": "hi"}, Mode: taskgate.ModeAsync,
		Metadata: map[string]string{"order": "1"}, TimeoutMS: 5000, IdempotencyKey: "my-key",
		Sandbox: &taskgate.Sandbox{DelayMS: 10, Outcome: taskgate.SandboxOutcomeFailed, ErrorCode: taskgate.SandboxErrorCodeTimeout},
	})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := `{"api":"sentiment","input":{"text":"hi"},"mode":"async","metadata":{"order":"1"},"timeout_ms":5000,` +
		`"sandbox":{"delay_ms":10,"error_code":"timeout","outcome":"failed"}}`
	if body != want {
		t.Fatalf("body\n%s\nwant\n%s", body, want)
	}
	if got.Method != "POST" || got.URL.Path != "/api/v1/call" || got.Header.Get("Idempotency-Key") != "my-key" ||
		got.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("request %s %s %v", got.Method, got.URL.Path, got.Header)
	}
	if got.Header.Get("User-Agent") != "taskgate-go/"+taskgate.Version || got.Header.Get("Authorization") != "Bearer tg_stub_key" {
		t.Fatalf("headers %v", got.Header)
	}
	if taskgate.Version != "0.1.0" {
		t.Fatalf("Version %q", taskgate.Version)
	}
}

func TestConnectionErrorOnAClosedPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c := taskgate.NewClient("tg_key", taskgate.WithBaseURL("http://"+addr+"/api/v1"), taskgate.WithMaxRetries(0))
	_, err = c.APIs.Get(context.Background(), "sentiment")
	var ce *taskgate.ConnectionError
	if !errors.As(err, &ce) || !taskgate.IsConnectionError(err) || ce.Unwrap() == nil || ce.Timeout {
		t.Fatalf("want a *taskgate.ConnectionError, got %T %v", err, err)
	}
	var e *taskgate.Error
	if errors.As(err, &e) {
		t.Fatalf("a connection error is not an *Error")
	}
}

func TestConnectionErrorsAreRetried(t *testing.T) {
	var calls atomic.Int32
	c := stub(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			// Hang up without an answer.
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		writeEnvelope(w, 200, stubTask("task_e"))
	})
	task, err := c.Tasks.Cancel(context.Background(), "task_e")
	if err != nil || task.ID != "task_e" || calls.Load() != 2 {
		t.Fatalf("task %v err %v after %d requests", task, err, calls.Load())
	}
}

func TestTimeoutIsAConnectionError(t *testing.T) {
	c := stub(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}, taskgate.WithTimeout(100*time.Millisecond), taskgate.WithMaxRetries(0))
	_, err := c.Tasks.Get(context.Background(), "task_a")
	var ce *taskgate.ConnectionError
	if !errors.As(err, &ce) || !ce.Timeout {
		t.Fatalf("want a timed-out *taskgate.ConnectionError, got %T %v", err, err)
	}
}

func TestCallersContextErrorIsReturnedAsIs(t *testing.T) {
	c := stub(t, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.Tasks.Get(ctx, "task_a")
	if !errors.Is(err, context.DeadlineExceeded) || taskgate.IsConnectionError(err) {
		t.Fatalf("want context.DeadlineExceeded, got %T %v", err, err)
	}
}

func TestMissingAPIKeyFailsEveryRequestAtOnce(t *testing.T) {
	t.Setenv("TASKGATE_API_KEY", "")
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) }))
	defer srv.Close()
	c := taskgate.NewClient("", taskgate.WithBaseURL(srv.URL))
	_, err := c.Call(context.Background(), taskgate.CallParams{API: "sentiment", Input: map[string]any{"text": "hi"}})
	if !errors.Is(err, taskgate.ErrMissingAPIKey) {
		t.Fatalf("want ErrMissingAPIKey, got %v", err)
	}
	for _, err := range c.Tasks.List(context.Background(), taskgate.TaskListParams{}) {
		if !errors.Is(err, taskgate.ErrMissingAPIKey) {
			t.Fatalf("want ErrMissingAPIKey, got %v", err)
		}
	}
	if calls.Load() != 0 {
		t.Fatalf("%d requests sent without a key", calls.Load())
	}
}

func TestDefaultBaseURL(t *testing.T) {
	t.Setenv("TASKGATE_BASE_URL", "")
	if got := taskgate.NewClient("k").BaseURL(); got != "http://127.0.0.1:8080/api/v1" {
		t.Fatalf("default base URL %q", got)
	}
	t.Setenv("TASKGATE_BASE_URL", "http://example.test:9/api/v1/")
	if got := taskgate.NewClient("k").BaseURL(); got != "http://example.test:9/api/v1" {
		t.Fatalf("base URL from the environment %q", got)
	}
	if got := taskgate.NewClient("k", taskgate.WithBaseURL("http://h/api/v1/")).BaseURL(); got != "http://h/api/v1" {
		t.Fatalf("base URL from the option %q", got)
	}
}

func TestListQueryParameters(t *testing.T) {
	var mu sync.Mutex
	var queries []string
	c := stub(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.URL.RawQuery)
		n := len(queries)
		mu.Unlock()
		next := any(nil)
		if n == 1 {
			next = "asc_01"
		}
		writeEnvelope(w, 200, map[string]any{"object": "list", "items": []any{stubTask("task_x")}, "has_more": next != nil, "next_cursor": next})
	})
	after := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.FixedZone("x", 3600))
	var n int
	for task, err := range c.Tasks.List(context.Background(), taskgate.TaskListParams{
		Limit: 1, API: "sentiment", Status: []taskgate.TaskStatus{taskgate.TaskStatusSucceeded, taskgate.TaskStatusFailed},
		CreatedAfter: after, Order: taskgate.OrderAsc,
	}) {
		if err != nil || task.ID != "task_x" {
			t.Fatal(task, err)
		}
		n++
	}
	want := []string{
		"api=sentiment&created_after=2026-01-02T02%3A04%3A05.006Z&limit=1&order=asc&status=succeeded%2Cfailed",
		"api=sentiment&created_after=2026-01-02T02%3A04%3A05.006Z&cursor=asc_01&limit=1&order=asc&status=succeeded%2Cfailed",
	}
	mu.Lock()
	defer mu.Unlock()
	if n != 2 || strings.Join(queries, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%d items; queries\n%s\nwant\n%s", n, strings.Join(queries, "\n"), strings.Join(want, "\n"))
	}
}
