package taskgate

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"
)

// maxHonouredRetryAfter is the longest Retry-After a retry waits for; a
// longer one is returned to the caller at once, who knows better whether to
// wait that long.
const maxHonouredRetryAfter = 60 * time.Second

// request is one logical API request, sent once plus its retries.
type request struct {
	method string
	path   string // below the base URL, e.g. "/tasks/task_…"
	query  url.Values
	body   []byte // JSON, nil for none
	// idempotencyKey is sent as the Idempotency-Key header when set.
	idempotencyKey string
	// retryable says whether the request may be sent again after a failure.
	retryable bool
	// stream keeps the body open for the caller (Server-Sent Events).
	stream bool
}

// response is a successful (2xx) answer.
type response struct {
	status int
	header http.Header
	body   []byte        // the whole body, when not streaming
	stream io.ReadCloser // the open body, when streaming
	// stop ends the stream's idle timer; call it with stream.Close.
	stop func()
	// touch restarts the stream's idle timer after progress.
	touch func()
	// timedOut reports whether the stream's idle timer ended it.
	timedOut func() bool
}

// send sends r, retrying as the client's policy says, and returns the
// first 2xx answer or the last error.
func (c *Client) send(ctx context.Context, r request) (*response, error) {
	if c.apiKey == "" {
		return nil, ErrMissingAPIKey
	}
	for attempt := 0; ; attempt++ {
		resp, err := c.attempt(ctx, r)
		if err == nil {
			return resp, nil
		}
		wait, retry := c.shouldRetry(r, attempt, err)
		if !retry {
			return nil, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// shouldRetry decides whether the failed attempt number attempt (0 first)
// is tried again, and after what wait.
func (c *Client) shouldRetry(r request, attempt int, err error) (time.Duration, bool) {
	if !r.retryable || attempt >= c.maxRetries {
		return 0, false
	}
	var apiErr *Error
	if errors.As(err, &apiErr) {
		switch {
		case apiErr.StatusCode == http.StatusRequestTimeout,
			apiErr.StatusCode == http.StatusConflict && apiErr.Code == "idempotency_in_progress",
			apiErr.StatusCode == http.StatusTooManyRequests,
			apiErr.StatusCode >= 500:
		default:
			return 0, false
		}
		if d, ok := retryAfter(apiErr.Header); ok {
			if d > maxHonouredRetryAfter {
				return 0, false
			}
			return d, true
		}
		return backoff(attempt), true
	}
	if IsConnectionError(err) {
		return backoff(attempt), true
	}
	return 0, false
}

// backoff is the wait before retry number attempt+1: 0.5 s doubling, at
// most 8 s, less up to a quarter at random so that clients spread out.
func backoff(attempt int) time.Duration {
	d := math.Min(0.5*math.Pow(2, float64(attempt)), 8)
	d *= 1 - 0.25*mrand.Float64()
	return time.Duration(d * float64(time.Second))
}

// attempt sends r once.
func (c *Client) attempt(ctx context.Context, r request) (*response, error) {
	u := c.baseURL + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	actx, cancel := context.WithCancel(ctx)
	var timedOut atomic.Bool
	var timer *time.Timer
	if c.timeout > 0 {
		timer = time.AfterFunc(c.timeout, func() {
			timedOut.Store(true)
			cancel()
		})
	}
	stop := func() {
		if timer != nil {
			timer.Stop()
		}
		cancel()
	}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(actx, r.method, u, body)
	if err != nil {
		stop()
		return nil, fmt.Errorf("taskgate: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.apiKey)
	req.Header.Set("User-Agent", userAgent)
	if r.stream {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", r.idempotencyKey)
	}

	res, err := c.httpClient.Do(req)
	if err != nil {
		stop()
		return nil, c.connectionError(ctx, err, timedOut.Load())
	}
	if r.stream && res.StatusCode/100 == 2 {
		c.remember(res.Header)
		touch := func() {
			if timer != nil {
				timer.Reset(c.timeout)
			}
		}
		touch()
		return &response{status: res.StatusCode, header: res.Header, stream: res.Body, stop: stop, touch: touch, timedOut: timedOut.Load}, nil
	}
	data, err := io.ReadAll(res.Body)
	res.Body.Close()
	stop()
	if err != nil {
		return nil, c.connectionError(ctx, err, timedOut.Load())
	}
	c.remember(res.Header)
	if res.StatusCode/100 != 2 {
		return nil, parseError(res, data)
	}
	return &response{status: res.StatusCode, header: res.Header, body: data}, nil
}

// connectionError wraps a transport failure; a failure caused by the
// caller's own context is the context's error instead.
func (c *Client) connectionError(ctx context.Context, err error, timedOut bool) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return &ConnectionError{Err: err, Timeout: timedOut}
}

// parseError turns an error answer into an *Error, from the envelope when
// the body is one, else from the status alone (a proxy's page, say).
func parseError(res *http.Response, data []byte) *Error {
	e := &Error{StatusCode: res.StatusCode, Header: res.Header, RequestID: res.Header.Get("X-Request-Id")}
	var env ErrorEnvelope
	if json.Unmarshal(data, &env) == nil && env.Error.Code != "" {
		e.Type = env.Error.Type
		e.Code = env.Error.Code
		e.Message = env.Error.Message
		if env.Error.Param != nil {
			e.Param = *env.Error.Param
		}
		e.Details = env.Error.Details
		if env.Meta.RequestID != "" {
			e.RequestID = env.Meta.RequestID
		}
	} else {
		e.Message = http.StatusText(res.StatusCode)
	}
	if d, ok := retryAfter(res.Header); ok {
		e.RetryAfter = d
	}
	return e
}

// getJSON sends a GET and decodes the envelope's data into out.
func (c *Client) getJSON(ctx context.Context, path string, query url.Values, out any) error {
	resp, err := c.send(ctx, request{method: http.MethodGet, path: path, query: query, retryable: true})
	if err != nil {
		return err
	}
	return decodeData(resp.body, out)
}

// decodeData decodes the `data` of a success envelope into out.
func decodeData(body []byte, out any) error {
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("taskgate: unreadable answer: %w", err)
	}
	if err := json.Unmarshal(env.Data, out); err != nil {
		return fmt.Errorf("taskgate: unreadable answer data: %w", err)
	}
	return nil
}

// newIdempotencyKey returns a random UUID version 4, as Stripe's libraries
// generate for retried POSTs.
func newIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.20+ on Linux)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// pathEscape escapes one path segment (an id or a slug).
func pathEscape(s string) string { return url.PathEscape(s) }
