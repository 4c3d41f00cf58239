package taskgate

import (
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// Version is this library's version, the version of the Taskgate server it
// was written for. It is sent in the User-Agent header.
const Version = "0.1.0"

const (
	// DefaultBaseURL is the base URL used when neither WithBaseURL nor the
	// TASKGATE_BASE_URL environment variable gives one.
	DefaultBaseURL = "http://127.0.0.1:8080/api/v1"
	// DefaultTimeout is the default time limit of one HTTP request.
	DefaultTimeout = 60 * time.Second
	// DefaultMaxRetries is the default number of retries of a failed request.
	DefaultMaxRetries = 2
)

const userAgent = "taskgate-go/" + Version

// Client talks to one Taskgate service with one API key. It is safe for
// concurrent use. Make it with NewClient.
type Client struct {
	// Tasks reads, lists, cancels, waits for and streams tasks.
	Tasks *TasksService
	// APIs browses the catalog of APIs.
	APIs *APIsService
	// WebhookEndpoints manages webhook endpoints and signing secrets.
	WebhookEndpoints *WebhookEndpointsService
	// WebhookDeliveries reads the webhook delivery log and retries deliveries.
	WebhookDeliveries *WebhookDeliveriesService

	apiKey     string
	baseURL    string
	httpClient *http.Client
	maxRetries int
	timeout    time.Duration

	mu            sync.Mutex
	lastRateLimit RateLimit
	lastRequestID string
}

// Option configures a Client made by NewClient.
type Option func(*Client)

// WithBaseURL sets the service's base URL, e.g. "https://tg.example.com/api/v1"
// (a trailing slash is tolerated). An empty url changes nothing: the default
// is TASKGATE_BASE_URL, else DefaultBaseURL.
func WithBaseURL(url string) Option {
	return func(c *Client) {
		if url != "" {
			c.baseURL = strings.TrimRight(url, "/")
		}
	}
}

// WithHTTPClient sets the *http.Client that sends the requests (for a proxy,
// custom TLS or transport). The default is a client of its own.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.httpClient = hc
		}
	}
}

// WithMaxRetries sets how many times a failed request is retried (connection
// errors, 408, 409 idempotency_in_progress, 429 and 5xx). 0 disables retries.
// The default is DefaultMaxRetries (2).
func WithMaxRetries(n int) Option {
	return func(c *Client) {
		if n < 0 {
			n = 0
		}
		c.maxRetries = n
	}
}

// WithTimeout sets the time limit of each HTTP request (each attempt). For a
// stream it bounds the wait for the answer's start and then each silence
// between two events. The default is DefaultTimeout (60 s); 0 means no limit.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) { c.timeout = d }
}

// NewClient makes a client. An empty apiKey means the TASKGATE_API_KEY
// environment variable. With no key at all the client is still made, but
// every request fails at once with ErrMissingAPIKey.
func NewClient(apiKey string, opts ...Option) *Client {
	if apiKey == "" {
		apiKey = os.Getenv("TASKGATE_API_KEY")
	}
	base := os.Getenv("TASKGATE_BASE_URL")
	if base == "" {
		base = DefaultBaseURL
	}
	c := &Client{
		apiKey:     apiKey,
		baseURL:    strings.TrimRight(base, "/"),
		httpClient: &http.Client{},
		maxRetries: DefaultMaxRetries,
		timeout:    DefaultTimeout,
	}
	for _, o := range opts {
		o(c)
	}
	c.Tasks = &TasksService{c: c}
	c.APIs = &APIsService{c: c}
	c.WebhookEndpoints = &WebhookEndpointsService{c: c}
	c.WebhookDeliveries = &WebhookDeliveriesService{c: c}
	return c
}

// BaseURL returns the base URL the client sends its requests to, without a
// trailing slash.
func (c *Client) BaseURL() string { return c.baseURL }

// LastRateLimit returns the rate-limit headers of the last answer the client
// received (success or error). Its fields are zero when that answer had none:
// unlimited plans send none.
func (c *Client) LastRateLimit() RateLimit {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastRateLimit
}

// LastRequestID returns the request id (X-Request-Id) of the last answer the
// client received, or "" before the first.
func (c *Client) LastRequestID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastRequestID
}

func (c *Client) remember(h http.Header) {
	rl := parseRateLimit(h)
	id := h.Get("X-Request-Id")
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastRateLimit = rl
	c.lastRequestID = id
}
