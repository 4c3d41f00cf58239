package taskgate

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// ErrMissingAPIKey is returned by every request of a client made without an
// API key: NewClient was given an empty key and TASKGATE_API_KEY is unset or
// empty. No request is sent.
var ErrMissingAPIKey = errors.New("taskgate: no API key: pass one to NewClient or set TASKGATE_API_KEY")

// Error is an error answer of the service: any HTTP status of 400 or more,
// with the fields of the error envelope. Use errors.As to reach it, or the
// helpers IsNotFound, IsRateLimited, … to test its status.
type Error struct {
	// StatusCode is the HTTP status, e.g. 404.
	StatusCode int
	// Type is the error type, fixed by the status: invalid_request_error,
	// authentication_error, permission_error, not_found_error, conflict_error,
	// rate_limit_error or api_error.
	Type string
	// Code is the machine-readable reason, e.g. task_not_found.
	Code string
	// Message is the human-readable explanation.
	Message string
	// Param names the request field or parameter at fault, when there is one.
	Param string
	// RequestID is the id of the request (meta.request_id, or the
	// X-Request-Id header), to quote when reporting a problem.
	RequestID string
	// RetryAfter is the wait the service asked for in its Retry-After
	// header (429 and some 503 answers); zero when there was none.
	RetryAfter time.Duration
	// Details are the error's details where the service gives them: one
	// {path, message} per invalid input field, or the rate-limit window.
	Details []map[string]any
	// Header is the answer's HTTP header.
	Header http.Header
}

// Error describes the error with its status, code, message and request id.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "taskgate: %d", e.StatusCode)
	if e.Code != "" {
		fmt.Fprintf(&b, " %s", e.Code)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if e.Param != "" {
		fmt.Fprintf(&b, " (param %s)", e.Param)
	}
	if e.RequestID != "" {
		fmt.Fprintf(&b, " [request %s]", e.RequestID)
	}
	return b.String()
}

// ConnectionError is a request that got no answer from the service: the
// connection failed, broke, or the request's timeout (WithTimeout) passed.
// Err is the cause. A context cancelled or past its deadline by the caller
// is not a ConnectionError: the context's own error is returned.
type ConnectionError struct {
	// Err is the underlying network error.
	Err error
	// Timeout is true when the request's timeout passed before an answer.
	Timeout bool
}

// Error describes the failure and its cause.
func (e *ConnectionError) Error() string {
	if e.Timeout {
		return "taskgate: request timed out: " + e.Err.Error()
	}
	return "taskgate: connection error: " + e.Err.Error()
}

// Unwrap returns the cause, for errors.Is and errors.As.
func (e *ConnectionError) Unwrap() error { return e.Err }

func statusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.StatusCode
	}
	return 0
}

// IsBadRequest reports whether err is a 400 answer (invalid JSON, field,
// input or parameter).
func IsBadRequest(err error) bool { return statusOf(err) == http.StatusBadRequest }

// IsAuthentication reports whether err is a 401 answer (missing, malformed,
// unknown, revoked or expired API key).
func IsAuthentication(err error) bool { return statusOf(err) == http.StatusUnauthorized }

// IsPermissionDenied reports whether err is a 403 answer (missing scope, API
// not allowed for the key, account suspended, spend limit reached).
func IsPermissionDenied(err error) bool { return statusOf(err) == http.StatusForbidden }

// IsNotFound reports whether err is a 404 answer (unknown task, API or route).
func IsNotFound(err error) bool { return statusOf(err) == http.StatusNotFound }

// IsConflict reports whether err is a 409 answer (task not cancellable, or
// idempotent request still in progress).
func IsConflict(err error) bool { return statusOf(err) == http.StatusConflict }

// IsUnprocessable reports whether err is a 422 answer (an Idempotency-Key
// reused with another body).
func IsUnprocessable(err error) bool { return statusOf(err) == http.StatusUnprocessableEntity }

// IsRateLimited reports whether err is a 429 answer; its RetryAfter says
// when to try again.
func IsRateLimited(err error) bool { return statusOf(err) == http.StatusTooManyRequests }

// IsInternal reports whether err is a 5xx answer (internal error, service
// unavailable).
func IsInternal(err error) bool { return statusOf(err) >= 500 }

// IsConnectionError reports whether err is a *ConnectionError: no answer
// because of the network or the request timeout.
func IsConnectionError(err error) bool {
	var e *ConnectionError
	return errors.As(err, &e)
}
