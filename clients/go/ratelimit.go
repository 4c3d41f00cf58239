package taskgate

import (
	"math"
	"net/http"
	"strconv"
	"time"
)

// RateLimit holds the rate-limit headers of one answer. The service sends
// them on every answer to a key of a limited plan, for the window closest to
// exhaustion; unlimited plans send none, and then every field is zero.
type RateLimit struct {
	// Limit is the window's number of requests (X-RateLimit-Limit).
	Limit int
	// Remaining is what is left of it (X-RateLimit-Remaining).
	Remaining int
	// Reset is when a request will be accepted again or the window resets
	// (X-RateLimit-Reset, Unix seconds); the zero time when absent.
	Reset time.Time
	// Policy is the raw RateLimit-Policy header, the plan's windows, e.g.
	// `"minute";q=60;w=60, "day";q=1000;w=86400`.
	Policy string
	// Current is the raw RateLimit header, e.g. `"minute";r=17;t=42`.
	Current string
}

// Present reports whether the answer carried rate-limit headers.
func (r RateLimit) Present() bool {
	return r.Limit != 0 || r.Policy != "" || r.Current != "" || !r.Reset.IsZero()
}

func parseRateLimit(h http.Header) RateLimit {
	var r RateLimit
	r.Limit, _ = strconv.Atoi(h.Get("X-RateLimit-Limit"))
	r.Remaining, _ = strconv.Atoi(h.Get("X-RateLimit-Remaining"))
	if s, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err == nil {
		r.Reset = time.Unix(s, 0)
	}
	r.Policy = h.Get("RateLimit-Policy")
	r.Current = h.Get("RateLimit")
	return r
}

// retryAfter reads a Retry-After header: whole seconds or an HTTP date.
// ok is false when the header is absent or unreadable.
func retryAfter(h http.Header) (d time.Duration, ok bool) {
	v := h.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if math.IsNaN(s) || s < 0 {
			return 0, false
		}
		// Far beyond any wait this library takes, and safe from overflow.
		return time.Duration(math.Min(s, 1e6) * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		d := time.Until(t)
		if d < 0 {
			d = 0
		}
		return d, true
	}
	return 0, false
}
