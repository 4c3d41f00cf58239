package taskgate

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strconv"
)

// WebhookEndpointsService manages where the key's account and mode gets its
// tasks' events, their signing secrets, and the secret that signs calls' own
// webhooks. Use it as Client.WebhookEndpoints; verify what a receiver gets
// with VerifyWebhook.
type WebhookEndpointsService struct {
	c *Client
}

// WebhookDeliveriesService reads the webhook delivery log and sends
// deliveries again. Use it as Client.WebhookDeliveries.
type WebhookDeliveriesService struct {
	c *Client
}

// WebhookEndpointParams are the fields of WebhookEndpoints.Create.
type WebhookEndpointParams struct {
	// URL is where the events are posted (http or https).
	URL string `json:"url"`
	// Events to send; empty means task.succeeded, task.failed and
	// task.cancelled.
	Events []WebhookEventName `json:"events,omitempty"`
	// Description is your own note.
	Description string `json:"description,omitempty"`
}

// WebhookEndpointUpdate are the changes of WebhookEndpoints.Update: only the
// fields set are sent.
type WebhookEndpointUpdate struct {
	URL         *string
	Events      []WebhookEventName
	Description *string
	// RemoveDescription sends `description: null`.
	RemoveDescription bool
	// Enabled true re-enables an endpoint disabled for any reason.
	Enabled *bool
}

func (u WebhookEndpointUpdate) body() map[string]any {
	b := map[string]any{}
	if u.URL != nil {
		b["url"] = *u.URL
	}
	if u.Events != nil {
		b["events"] = u.Events
	}
	if u.Description != nil {
		b["description"] = *u.Description
	}
	if u.RemoveDescription {
		b["description"] = nil
	}
	if u.Enabled != nil {
		b["enabled"] = *u.Enabled
	}
	return b
}

// WebhookDeliveryListParams are the filters and page size of
// WebhookDeliveries.List and ListPage. Every field may be left zero.
type WebhookDeliveryListParams struct {
	Limit      int
	EndpointID string
	TaskID     string
	Status     WebhookDeliveryStatus
	// Cursor starts after the page that returned it as NextCursor.
	Cursor string
}

func (p WebhookDeliveryListParams) query() url.Values {
	q := url.Values{}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	for name, v := range map[string]string{"endpoint_id": p.EndpointID, "task_id": p.TaskID, "status": string(p.Status), "cursor": p.Cursor} {
		if v != "" {
			q.Set(name, v)
		}
	}
	return q
}

// do sends a JSON body (nil: none) and decodes the answer's data into out.
func (c *Client) do(ctx context.Context, method, path string, body any, retryable bool, out any) error {
	var data []byte
	if body != nil {
		var err error
		if data, err = json.Marshal(body); err != nil {
			return fmt.Errorf("taskgate: cannot encode the request: %w", err)
		}
	}
	resp, err := c.send(ctx, request{method: method, path: path, body: data, retryable: retryable})
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	return decodeData(resp.body, out)
}

func endpointPath(id, more string) string { return "/webhook_endpoints/" + pathEscape(id) + more }

// Create makes an endpoint; its Secret (`whsec_…`) is set in this answer only
// (later: Secret).
func (s *WebhookEndpointsService) Create(ctx context.Context, p WebhookEndpointParams) (*WebhookEndpoint, error) {
	var e WebhookEndpoint
	if err := s.c.do(ctx, http.MethodPost, "/webhook_endpoints", p, false, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// Get returns one endpoint (without its secret).
func (s *WebhookEndpointsService) Get(ctx context.Context, id string) (*WebhookEndpoint, error) {
	var e WebhookEndpoint
	if err := s.c.getJSON(ctx, endpointPath(id, ""), nil, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// Update changes what u sets.
func (s *WebhookEndpointsService) Update(ctx context.Context, id string, u WebhookEndpointUpdate) (*WebhookEndpoint, error) {
	var e WebhookEndpoint
	if err := s.c.do(ctx, http.MethodPatch, endpointPath(id, ""), u.body(), true, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// Delete deletes an endpoint; its pending deliveries are not sent.
func (s *WebhookEndpointsService) Delete(ctx context.Context, id string) error {
	return s.c.do(ctx, http.MethodDelete, endpointPath(id, ""), nil, true, nil)
}

// ListPage returns one page of endpoints, oldest first.
func (s *WebhookEndpointsService) ListPage(ctx context.Context, limit int, cursor string) (*WebhookEndpointList, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	var page WebhookEndpointList
	if err := s.c.getJSON(ctx, "/webhook_endpoints", q, &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// List returns every endpoint, fetching page after page (limit is the page
// size; 0: the server's). An error ends the sequence.
func (s *WebhookEndpointsService) List(ctx context.Context, limit int) iter.Seq2[WebhookEndpoint, error] {
	return paginate(func(cursor string) ([]WebhookEndpoint, bool, string, error) {
		page, err := s.ListPage(ctx, limit, cursor)
		if err != nil {
			return nil, false, "", err
		}
		return page.Items, page.HasMore, deref(page.NextCursor), nil
	}, "")
}

func (s *WebhookEndpointsService) secret(ctx context.Context, method, path string, retryable bool) (string, error) {
	var out struct {
		Secret string `json:"secret"`
	}
	if err := s.c.do(ctx, method, path, nil, retryable, &out); err != nil {
		return "", err
	}
	return out.Secret, nil
}

// Secret returns the endpoint's signing secret.
func (s *WebhookEndpointsService) Secret(ctx context.Context, id string) (string, error) {
	return s.secret(ctx, http.MethodGet, endpointPath(id, "/secret"), true)
}

// RotateSecret makes a new secret; the old one keeps signing beside it for a
// while (24 h by default).
func (s *WebhookEndpointsService) RotateSecret(ctx context.Context, id string) (string, error) {
	return s.secret(ctx, http.MethodPost, endpointPath(id, "/rotate_secret"), false)
}

// Test sends the endpoint a webhook.test event now and returns its delivery.
func (s *WebhookEndpointsService) Test(ctx context.Context, id string) (*WebhookDelivery, error) {
	var d WebhookDelivery
	if err := s.c.do(ctx, http.MethodPost, endpointPath(id, "/test"), nil, false, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// SigningSecret returns the secret that signs calls' own webhooks
// (CallParams.Webhook) of the key's mode.
func (s *WebhookEndpointsService) SigningSecret(ctx context.Context) (string, error) {
	return s.secret(ctx, http.MethodGet, "/webhooks/secret", true)
}

// RotateSigningSecret rotates the calls' signing secret (the old one overlaps).
func (s *WebhookEndpointsService) RotateSigningSecret(ctx context.Context) (string, error) {
	return s.secret(ctx, http.MethodPost, "/webhooks/secret/rotate", false)
}

// Get returns one delivery with its attempts.
func (s *WebhookDeliveriesService) Get(ctx context.Context, id string) (*WebhookDelivery, error) {
	var d WebhookDelivery
	if err := s.c.getJSON(ctx, "/webhook_deliveries/"+pathEscape(id), nil, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// Retry sends the delivery again now: a new attempt, the same webhook-id.
func (s *WebhookDeliveriesService) Retry(ctx context.Context, id string) (*WebhookDelivery, error) {
	var d WebhookDelivery
	if err := s.c.do(ctx, http.MethodPost, "/webhook_deliveries/"+pathEscape(id)+"/retry", nil, false, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// ListPage returns one page of the delivery log, newest first.
func (s *WebhookDeliveriesService) ListPage(ctx context.Context, p WebhookDeliveryListParams) (*WebhookDeliveryList, error) {
	var page WebhookDeliveryList
	if err := s.c.getJSON(ctx, "/webhook_deliveries", p.query(), &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// List returns every delivery matching the filters, page after page.
func (s *WebhookDeliveriesService) List(ctx context.Context, p WebhookDeliveryListParams) iter.Seq2[WebhookDelivery, error] {
	return paginate(func(cursor string) ([]WebhookDelivery, bool, string, error) {
		p.Cursor = cursor
		page, err := s.ListPage(ctx, p)
		if err != nil {
			return nil, false, "", err
		}
		return page.Items, page.HasMore, deref(page.NextCursor), nil
	}, p.Cursor)
}
