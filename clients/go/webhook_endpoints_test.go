package taskgate_test

// Client.WebhookEndpoints and Client.WebhookDeliveries: what each method sends
// (against a stub), and one delivery end to end: the real server posts to a
// receiver of the test's own on loopback, and VerifyWebhook accepts it.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"
	"time"

	taskgate "github.com/taskgate/taskgate/clients/go"
)

var stubEndpoint = map[string]any{
	"id": "whe_01JD2W3KX7ABCDEFGHJKMNPQRS", "object": "webhook_endpoint",
	"url": "https://example.com/hook", "events": []string{"task.succeeded"},
	"description": nil, "enabled": true, "disabled_reason": nil, "mode": "live",
	"created_at": "2026-11-21T13:45:12.345Z",
}

var stubDelivery = map[string]any{
	"id": "whd_01JD2W3KX7ABCDEFGHJKMNPQRS", "object": "webhook_delivery",
	"message_id": "msg_01JD2W3KX7ABCDEFGHJKMNPQRS_succeeded", "endpoint_id": stubEndpoint["id"],
	"event_type": "task.succeeded", "task_id": "task_01JD2W3KX7ABCDEFGHJKMNPQRS", "mode": "live",
	"status": "succeeded", "attempts": []any{}, "next_attempt_at": nil,
	"created_at": "2026-11-21T13:45:12.345Z",
}

func with(base map[string]any, k string, v any) map[string]any {
	out := map[string]any{}
	for key, value := range base {
		out[key] = value
	}
	out[k] = v
	return out
}

func TestWebhookResourcesSendTheDocumentedRequests(t *testing.T) {
	id := stubEndpoint["id"].(string)
	did := stubDelivery["id"].(string)
	answers := []struct {
		status int
		data   any
	}{
		{201, with(stubEndpoint, "secret", "whsec_a")},
		{200, map[string]any{"object": "list", "items": []any{stubEndpoint}, "has_more": true, "next_cursor": id}},
		{200, map[string]any{"object": "list", "items": []any{with(stubEndpoint, "id", "whe_2")}, "has_more": false, "next_cursor": nil}},
		{200, with(stubEndpoint, "disabled_reason", "owner")},
		{200, map[string]any{"secret": "whsec_b"}},
		{200, map[string]any{"secret": "whsec_c"}},
		{202, with(stubDelivery, "event_type", "webhook.test")},
		{200, map[string]any{"id": id, "object": "webhook_endpoint", "deleted": true}},
		{200, map[string]any{"object": "list", "items": []any{stubDelivery}, "has_more": false, "next_cursor": nil}},
		{202, with(stubDelivery, "status", "pending")},
		{200, map[string]any{"secret": "whsec_d"}},
		{200, map[string]any{"secret": "whsec_e"}},
		{200, stubTask("task_a")},
	}
	var mu sync.Mutex
	var seen []string
	var bodies []string
	c := stub(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		n := len(seen)
		seen = append(seen, r.Method+" "+r.URL.RequestURI())
		bodies = append(bodies, string(body))
		mu.Unlock()
		writeEnvelope(w, answers[n].status, answers[n].data)
	}, taskgate.WithMaxRetries(0))
	ctx := context.Background()
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	made, err := c.WebhookEndpoints.Create(ctx, taskgate.WebhookEndpointParams{URL: "https://example.com/hook", Events: []taskgate.WebhookEventName{taskgate.WebhookEventNameTaskSucceeded}})
	check(err)
	if made.Secret == nil || *made.Secret != "whsec_a" {
		t.Fatalf("secret %v", made.Secret)
	}
	var ids []string
	for e, err := range c.WebhookEndpoints.List(ctx, 1) {
		check(err)
		ids = append(ids, e.ID)
	}
	if !reflect.DeepEqual(ids, []string{id, "whe_2"}) {
		t.Fatalf("listed %v", ids)
	}
	off := false
	changed, err := c.WebhookEndpoints.Update(ctx, id, taskgate.WebhookEndpointUpdate{Enabled: &off, RemoveDescription: true})
	check(err)
	if changed.DisabledReason == nil || *changed.DisabledReason != taskgate.WebhookDisabledReasonOwner {
		t.Fatalf("disabled_reason %v", changed.DisabledReason)
	}
	s, err := c.WebhookEndpoints.Secret(ctx, id)
	check(err)
	r, err := c.WebhookEndpoints.RotateSecret(ctx, id)
	check(err)
	if s != "whsec_b" || r != "whsec_c" {
		t.Fatalf("secrets %q %q", s, r)
	}
	d, err := c.WebhookEndpoints.Test(ctx, id)
	check(err)
	if d.EventType != taskgate.WebhookEventNameWebhookTest {
		t.Fatalf("test event %q", d.EventType)
	}
	check(c.WebhookEndpoints.Delete(ctx, id))
	for d, err := range c.WebhookDeliveries.List(ctx, taskgate.WebhookDeliveryListParams{EndpointID: id, Status: taskgate.WebhookDeliveryStatusFailed}) {
		check(err)
		if d.ID != did {
			t.Fatalf("delivery %q", d.ID)
		}
	}
	d, err = c.WebhookDeliveries.Retry(ctx, did)
	check(err)
	if d.Status != taskgate.WebhookDeliveryStatusPending {
		t.Fatalf("status %q", d.Status)
	}
	s, err = c.WebhookEndpoints.SigningSecret(ctx)
	check(err)
	r, err = c.WebhookEndpoints.RotateSigningSecret(ctx)
	check(err)
	if s != "whsec_d" || r != "whsec_e" {
		t.Fatalf("signing secrets %q %q", s, r)
	}
	_, err = c.Call(ctx, taskgate.CallParams{API: "sentiment", Input: map[string]any{"text": "hi"},
		Webhook: &taskgate.CallWebhook{URL: "https://example.com/hook", Events: []taskgate.WebhookEventName{taskgate.WebhookEventNameTaskFailed}}})
	check(err)

	e := "/api/v1/webhook_endpoints/" + id
	want := []string{
		"POST /api/v1/webhook_endpoints",
		"GET /api/v1/webhook_endpoints?limit=1",
		"GET /api/v1/webhook_endpoints?cursor=" + id + "&limit=1",
		"PATCH " + e,
		"GET " + e + "/secret",
		"POST " + e + "/rotate_secret",
		"POST " + e + "/test",
		"DELETE " + e,
		"GET /api/v1/webhook_deliveries?endpoint_id=" + id + "&status=failed",
		"POST /api/v1/webhook_deliveries/" + did + "/retry",
		"GET /api/v1/webhooks/secret",
		"POST /api/v1/webhooks/secret/rotate",
		"POST /api/v1/call",
	}
	if !reflect.DeepEqual(seen, want) {
		t.Fatalf("sent\n%v\nwant\n%v", seen, want)
	}
	var body map[string]any
	check(json.Unmarshal([]byte(bodies[3]), &body))
	if !reflect.DeepEqual(body, map[string]any{"enabled": false, "description": nil}) {
		t.Fatalf("PATCH body %v", body)
	}
	check(json.Unmarshal([]byte(bodies[12]), &body))
	if !reflect.DeepEqual(body["webhook"], map[string]any{"url": "https://example.com/hook", "events": []any{"task.failed"}}) {
		t.Fatalf("call body %v", body)
	}
}

func TestLiveWebhookDeliveryVerifies(t *testing.T) {
	c := live(t, "TASKGATE_API_KEY")
	type message struct {
		body   []byte
		header http.Header
	}
	got := make(chan message, 16)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- message{body, r.Header.Clone()}
	}))
	defer receiver.Close()
	ctx := context.Background()
	marker := unique(t)
	endpoint, err := c.WebhookEndpoints.Create(ctx, taskgate.WebhookEndpointParams{
		URL: receiver.URL + "/hook", Events: []taskgate.WebhookEventName{taskgate.WebhookEventNameTaskSucceeded}, Description: marker,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.WebhookEndpoints.Delete(ctx, endpoint.ID) }()
	if endpoint.Secret == nil {
		t.Fatal("no secret in the created endpoint")
	}
	task, err := c.Call(ctx, taskgate.CallParams{API: "sentiment", Input: map[string]any{"text": "webhooks are nice"}, Metadata: map[string]string{"marker": marker}})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.After(15 * time.Second)
	for {
		select {
		case m := <-got:
			event, err := taskgate.VerifyWebhook(m.body, m.header, *endpoint.Secret)
			if err != nil {
				t.Fatal(err)
			}
			var data struct {
				ID       string            `json:"id"`
				Metadata map[string]string `json:"metadata"`
			}
			if err := json.Unmarshal(event.Data, &data); err != nil {
				t.Fatal(err)
			}
			if data.ID != task.ID {
				continue
			}
			if event.Type != taskgate.WebhookTaskSucceeded || data.Metadata["marker"] != marker {
				t.Fatalf("event %+v", event)
			}
			for d, err := range c.WebhookDeliveries.List(ctx, taskgate.WebhookDeliveryListParams{TaskID: task.ID}) {
				if err != nil {
					t.Fatal(err)
				}
				if d.EndpointID == nil || *d.EndpointID != endpoint.ID {
					t.Fatalf("delivery %+v", d)
				}
			}
			return
		case <-deadline:
			t.Fatal("no delivery within 15 s")
		}
	}
}
