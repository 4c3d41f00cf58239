package taskgate_test

// Errors, rate limits and idempotent retries against the real server
// started by scripts/with-server.sh (skipped without one, unless CI=true).

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	taskgate "github.com/taskgate/taskgate/clients/go"
)

// errorOf returns err as a *taskgate.Error of that status and code, or fails.
func errorOf(t *testing.T, err error, status int, code string) *taskgate.Error {
	t.Helper()
	var e *taskgate.Error
	if !errors.As(err, &e) {
		t.Fatalf("want a %d %s *taskgate.Error, got %T %v", status, code, err, err)
	}
	if e.StatusCode != status || e.Code != code || !strings.HasPrefix(e.RequestID, "req_") || e.Message == "" || e.Type == "" {
		t.Fatalf("want %d %s, got %+v", status, code, e)
	}
	return e
}

func TestErrors(t *testing.T) {
	c := live(t, "TASKGATE_API_KEY")
	base := env(t, "TASKGATE_BASE_URL")

	t.Run("400", func(t *testing.T) {
		_, err := c.Call(bg, taskgate.CallParams{API: "sentiment", Input: map[string]any{}})
		e := errorOf(t, err, 400, "invalid_input")
		if !taskgate.IsBadRequest(err) || e.Type != "invalid_request_error" || e.Param != "input.text" || len(e.Details) == 0 {
			t.Fatalf("%+v", e)
		}
		if e.Details[0]["message"] == nil {
			t.Fatalf("details %v", e.Details)
		}
	})
	t.Run("401", func(t *testing.T) {
		bad := taskgate.NewClient("tg_thisIsNotARealKeyAtAllxxxxxxxxxxxxxx", taskgate.WithBaseURL(base))
		_, err := bad.APIs.Get(bg, "sentiment")
		e := errorOf(t, err, 401, "invalid_api_key")
		if !taskgate.IsAuthentication(err) || e.Type != "authentication_error" {
			t.Fatalf("%+v", e)
		}
	})
	t.Run("403", func(t *testing.T) {
		restricted := live(t, "TASKGATE_RESTRICTED_KEY")
		_, err := restricted.Call(bg, sentiment("hi"))
		e := errorOf(t, err, 403, "insufficient_permissions")
		if !taskgate.IsPermissionDenied(err) || e.Type != "permission_error" {
			t.Fatalf("%+v", e)
		}
		// Its scopes do let it read the catalog.
		if _, err := restricted.APIs.Get(bg, "sentiment"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("404", func(t *testing.T) {
		_, err := c.Tasks.Get(bg, "task_01JD2W3KX7ZZZZZZZZZZZZZZZZ")
		errorOf(t, err, 404, "task_not_found")
		if !taskgate.IsNotFound(err) {
			t.Fatal(err)
		}
		_, err = c.APIs.Get(bg, "no-such-api")
		errorOf(t, err, 404, "api_not_found")
		events := 0
		for _, err := range c.Tasks.Stream(bg, "task_01JD2W3KX7ZZZZZZZZZZZZZZZZ") {
			errorOf(t, err, 404, "task_not_found")
			events++
		}
		if events != 1 {
			t.Fatalf("the stream of an unknown task yielded %d times, want its error once", events)
		}
	})
	t.Run("409", func(t *testing.T) {
		task, err := c.Call(bg, sentiment("done already"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Tasks.Cancel(bg, task.ID)
		e := errorOf(t, err, 409, "task_not_cancellable")
		if !taskgate.IsConflict(err) || e.Type != "conflict_error" {
			t.Fatalf("%+v", e)
		}
	})
	t.Run("422", func(t *testing.T) {
		key := unique(t)
		p := sentiment("one body")
		p.IdempotencyKey = key
		first, err := c.Call(bg, p)
		if err != nil {
			t.Fatal(err)
		}
		replay, err := c.Call(bg, p)
		if err != nil || replay.ID != first.ID {
			t.Fatalf("replay %v %v, want task %s", replay, err, first.ID)
		}
		p.Input = map[string]any{"text": "another body"}
		_, err = c.Call(bg, p)
		errorOf(t, err, 422, "idempotency_key_reused")
		if !taskgate.IsUnprocessable(err) {
			t.Fatal(err)
		}
	})
}

func TestRateLimitHeadersAnd429(t *testing.T) {
	// The limited key allows 5 requests per rolling minute, for every test of
	// the server run: go on until the 429.
	c := live(t, "TASKGATE_LIMITED_KEY", taskgate.WithMaxRetries(0))
	var err error
	for i := 0; i < 10 && err == nil; i++ {
		_, err = c.APIs.Get(bg, "sentiment")
		rl := c.LastRateLimit()
		if rl.Limit != 5 || rl.Reset.IsZero() || !strings.Contains(rl.Policy, "q=5") || rl.Current == "" {
			t.Fatalf("rate limit after request %d: %+v", i+1, rl)
		}
		if err == nil && rl.Remaining > 4 {
			t.Fatalf("remaining %d of 5", rl.Remaining)
		}
	}
	e := errorOf(t, err, 429, "rate_limit_exceeded")
	if !taskgate.IsRateLimited(err) || e.Type != "rate_limit_error" {
		t.Fatalf("%+v", e)
	}
	if e.RetryAfter < time.Second || e.RetryAfter > 60*time.Second {
		t.Fatalf("RetryAfter %v", e.RetryAfter)
	}
	if len(e.Details) == 0 || e.Details[0]["window"] != "minute" {
		t.Fatalf("details %v", e.Details)
	}
	if c.LastRateLimit().Remaining != 0 {
		t.Fatalf("remaining after a 429: %+v", c.LastRateLimit())
	}
}

// A proxy that passes the first POST /call to the server but answers the
// client 503 in its place: the client retries with the same generated
// Idempotency-Key and gets the task the first request made, replayed.
func TestIdempotentRetryCreatesOneTask(t *testing.T) {
	base := env(t, "TASKGATE_BASE_URL")
	key := env(t, "TASKGATE_API_KEY")
	server, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var keys, replayed []string
	calls := 0
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequest(r.Method, server.Scheme+"://"+server.Host+r.URL.RequestURI(), strings.NewReader(string(body)))
		req.Header = r.Header.Clone()
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), 502)
			return
		}
		defer res.Body.Close()
		answer, _ := io.ReadAll(res.Body)
		mu.Lock()
		calls++
		n := calls
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		replayed = append(replayed, res.Header.Get("Idempotent-Replayed"))
		mu.Unlock()
		if n == 1 {
			writeError(w, 503, "api_error", "service_unavailable", "the proxy lost the answer")
			return
		}
		for k, v := range res.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(res.StatusCode)
		w.Write(answer)
	}))
	defer proxy.Close()

	c := taskgate.NewClient(key, taskgate.WithBaseURL(proxy.URL+server.Path))
	run := unique(t)
	start := time.Now().Add(-time.Second)
	p := sentiment("retry me")
	p.Metadata = map[string]string{"run": run}
	task, err := c.Call(bg, p)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if calls != 2 || keys[0] == "" || keys[0] != keys[1] || !uuidV4.MatchString(keys[0]) || replayed[1] != "true" {
		t.Fatalf("%d requests, keys %q, replayed %q", calls, keys, replayed)
	}
	mu.Unlock()

	direct := live(t, "TASKGATE_API_KEY")
	var found []string
	for listed, err := range direct.Tasks.List(bg, taskgate.TaskListParams{API: "sentiment", CreatedAfter: start, Limit: 100}) {
		if err != nil {
			t.Fatal(err)
		}
		if listed.Metadata["run"] == run {
			found = append(found, listed.ID)
		}
	}
	if len(found) != 1 || found[0] != task.ID {
		t.Fatalf("tasks of this call: %v, want exactly [%s]", found, task.ID)
	}
	d, err := direct.Tasks.Get(bg, task.ID)
	if err != nil || d.IdempotencyKey == nil || *d.IdempotencyKey != keys[0] {
		t.Fatalf("details %+v %v", d, err)
	}
}
