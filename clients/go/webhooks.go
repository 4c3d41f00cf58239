package taskgate

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ErrWebhookVerification is wrapped by every error of VerifyWebhook: test for
// it with errors.Is and answer such a delivery with a 400.
var ErrWebhookVerification = errors.New("taskgate: webhook verification failed")

// WebhookTolerance is how far a delivery's webhook-timestamp may be from the
// receiver's clock, either way (the Standard Webhooks recommendation).
const WebhookTolerance = 5 * time.Minute

// The webhook event types.
const (
	WebhookTaskRunning   = "task.running"
	WebhookTaskSucceeded = "task.succeeded"
	WebhookTaskFailed    = "task.failed"
	WebhookTaskCancelled = "task.cancelled"
	WebhookTest          = "webhook.test"
)

// WebhookEvent is a verified webhook delivery's event: the body's {type,
// timestamp, data}, and the delivery's message id.
type WebhookEvent struct {
	// MessageID is the webhook-id header (msg_…), the same on every retry
	// and replay of this event: keep it to process each event once.
	MessageID string `json:"-"`
	// Type is task.running, task.succeeded, task.failed, task.cancelled or
	// webhook.test.
	Type string `json:"type"`
	// Timestamp is when the event happened.
	Timestamp time.Time `json:"timestamp"`
	// Data is the event's object as sent: for a task.* event the task (read
	// it with Task); for webhook.test a small object describing the test.
	Data json.RawMessage `json:"data"`
}

// WebhookTask is a task as a webhook event carries it: the Task (as GET
// /api/v1/tasks/{id} shows it, without input), with Output nil and
// OutputOmitted true when the output was too large to send (fetch the task
// for it).
type WebhookTask struct {
	Task
	OutputOmitted bool `json:"output_omitted,omitempty"`
}

// Task decodes the event's data as a task. It fails for an event that is not
// task.*.
func (e WebhookEvent) Task() (*WebhookTask, error) {
	if !strings.HasPrefix(e.Type, "task.") {
		return nil, fmt.Errorf("taskgate: a %s event carries no task", e.Type)
	}
	var t WebhookTask
	if err := json.Unmarshal(e.Data, &t); err != nil {
		return nil, fmt.Errorf("taskgate: the %s event's data is not a task: %w", e.Type, err)
	}
	return &t, nil
}

// webhookNow is the receiver's clock; the tests set it.
var webhookNow = time.Now

// VerifyWebhook checks a webhook delivery as Standard Webhooks 1.0 signs it,
// and returns its event. payload is the request's body exactly as received
// (read it whole before parsing anything), header the request's header, and
// secret the endpoint's signing secret, whsec_… (as in the official
// libraries, the prefix may be left out).
//
// The delivery is accepted when one of the v1 signatures in webhook-signature
// (several, separated by spaces, while a secret rotation overlaps) is the
// HMAC-SHA256 of "{webhook-id}.{webhook-timestamp}.{payload}" under the secret,
// compared in constant time, and webhook-timestamp is within WebhookTolerance
// of the clock, either way. Every error wraps ErrWebhookVerification: a missing
// header, no matching signature, a timestamp outside the tolerance, a secret
// that is not base64, or a signed body that is not an event.
func VerifyWebhook(payload []byte, header http.Header, secret string) (WebhookEvent, error) {
	key, err := webhookKey(secret)
	if err != nil {
		return WebhookEvent{}, err
	}
	id := firstHeader(header, "webhook-id")
	ts := firstHeader(header, "webhook-timestamp")
	sigs := strings.Join(headerValues(header, "webhook-signature"), " ")
	var missing []string
	for _, h := range [][2]string{{"webhook-id", id}, {"webhook-timestamp", ts}, {"webhook-signature", sigs}} {
		if strings.TrimSpace(h[1]) == "" {
			missing = append(missing, h[0])
		}
	}
	if len(missing) > 0 {
		return WebhookEvent{}, webhookErr("missing webhook header(s): %s", strings.Join(missing, ", "))
	}

	ts = strings.TrimSpace(ts)
	if len(ts) > 15 || strings.Trim(ts, "0123456789") != "" {
		return WebhookEvent{}, webhookErr("invalid webhook-timestamp header")
	}
	sent, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return WebhookEvent{}, webhookErr("invalid webhook-timestamp header")
	}
	now := webhookNow().Unix()
	tolerance := int64(WebhookTolerance / time.Second)
	if sent < now-tolerance {
		return WebhookEvent{}, webhookErr("message timestamp too old")
	}
	if sent > now+tolerance {
		return WebhookEvent{}, webhookErr("message timestamp too new")
	}

	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(payload)
	expected := mac.Sum(nil)
	matched := false
	for _, sig := range strings.Split(sigs, " ") {
		version, b64, ok := strings.Cut(sig, ",")
		if !ok || version != "v1" {
			continue
		}
		given, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			continue
		}
		if hmac.Equal(expected, given) {
			matched = true
		}
	}
	if !matched {
		return WebhookEvent{}, webhookErr("no matching signature found")
	}

	if !bytes.HasPrefix(bytes.TrimLeft(payload, " \t\r\n"), []byte("{")) {
		return WebhookEvent{}, webhookErr("the payload is not a JSON object")
	}
	var event WebhookEvent
	dec := json.NewDecoder(bytes.NewReader(payload))
	if err := dec.Decode(&event); err != nil {
		return WebhookEvent{}, webhookErr("the payload is not a webhook event: %v", err)
	}
	if dec.More() {
		return WebhookEvent{}, webhookErr("the payload is not a webhook event: data after the JSON object")
	}
	event.MessageID = id
	return event, nil
}

// headerValues is header.Values(name), also for a header built by hand with
// keys in another case than the canonical one (http.Header{"webhook-id": …}).
func headerValues(header http.Header, name string) []string {
	if v := header.Values(name); len(v) > 0 {
		return v
	}
	var out []string
	for k, v := range header {
		if strings.EqualFold(k, name) {
			out = append(out, v...)
		}
	}
	return out
}

func firstHeader(header http.Header, name string) string {
	if v := headerValues(header, name); len(v) > 0 {
		return v[0]
	}
	return ""
}

func webhookKey(secret string) ([]byte, error) {
	text := strings.TrimPrefix(strings.TrimSpace(secret), "whsec_")
	key, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		key, err = base64.RawStdEncoding.DecodeString(text)
	}
	if err != nil {
		return nil, webhookErr("invalid webhook secret: not whsec_ and base64")
	}
	if len(key) == 0 {
		return nil, webhookErr("invalid webhook secret: empty")
	}
	return key, nil
}

func webhookErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrWebhookVerification, fmt.Sprintf(format, args...))
}
