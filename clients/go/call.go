package taskgate

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// CallParams are the parameters of Client.Call (POST /call). API and Input
// are required; every other field may be left zero.
type CallParams struct {
	// API is the slug of the API to call, e.g. "sentiment".
	API string
	// Input is the API's input: any value that encodes to a JSON object
	// (a map, a struct, a json.RawMessage), e.g. map[string]any{"text": "hi"}.
	Input any
	// Mode is ModeSync (the server's default: wait for the task) or
	// ModeAsync (answer at once with the task queued or running).
	Mode Mode
	// Metadata are your own string labels, returned with the task.
	Metadata map[string]string
	// TimeoutMS is the task's execution deadline in milliseconds; zero means
	// the API's own limit.
	TimeoutMS int
	// IdempotencyKey makes the call safe to repeat: the same key with the
	// same body within 24 h returns the original answer. When empty and
	// retries are enabled, the client generates one for the call (a UUID v4)
	// and sends it on every attempt.
	IdempotencyKey string
	// Sandbox controls the simulated outcome of a test-mode call (test keys
	// only; with a live key the service answers 400).
	Sandbox *Sandbox
	// Webhook is this call's own webhook: its task's events are posted to
	// its URL, signed with WebhookEndpoints.SigningSecret.
	Webhook *CallWebhook
}

// CallWebhook is a call's own webhook.
type CallWebhook struct {
	URL string `json:"url"`
	// Events to send (task.* only); empty means task.succeeded, task.failed
	// and task.cancelled.
	Events []WebhookEventName `json:"events,omitempty"`
}

// callBody is the JSON body of POST /call.
type callBody struct {
	API       string            `json:"api"`
	Input     any               `json:"input"`
	Mode      Mode              `json:"mode,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	TimeoutMS int               `json:"timeout_ms,omitempty"`
	Sandbox   *Sandbox          `json:"sandbox,omitempty"`
	Webhook   *CallWebhook      `json:"webhook,omitempty"`
}

// Call creates and executes a task (POST /call) and returns it: finished for
// a sync call (whatever its status: check Status and Error), queued or
// running for an async one or a sync one that outlasted the service's sync
// wait (then use Tasks.Wait). The call is retried after a failure only under
// an idempotency key, so that a retry never runs the task twice.
func (c *Client) Call(ctx context.Context, p CallParams) (*Task, error) {
	body, err := json.Marshal(callBody{
		API:       p.API,
		Input:     p.Input,
		Mode:      p.Mode,
		Metadata:  p.Metadata,
		TimeoutMS: p.TimeoutMS,
		Sandbox:   p.Sandbox,
		Webhook:   p.Webhook,
	})
	if err != nil {
		return nil, fmt.Errorf("taskgate: cannot encode the call: %w", err)
	}
	key := p.IdempotencyKey
	if key == "" && c.maxRetries > 0 {
		key = newIdempotencyKey()
	}
	resp, err := c.send(ctx, request{
		method:         http.MethodPost,
		path:           "/call",
		body:           body,
		idempotencyKey: key,
		retryable:      key != "",
	})
	if err != nil {
		return nil, err
	}
	var t Task
	if err := decodeData(resp.body, &t); err != nil {
		return nil, err
	}
	return &t, nil
}
