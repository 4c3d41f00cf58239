package taskgate

// VerifyWebhook against the Standard Webhooks reference vector and the vectors
// the official Python package signed (testdata/webhooks.json, made by
// testdata/webhooks_gen.py). Needs no server.

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The example of the specification's reference libraries' tests (and of
// crates/taskgate-core/src/webhook.rs).
const (
	refSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	refID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	refTimestamp = 1614265330
	refBody      = `{"test": 2432232314}`
	refSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

// setClock sets the receiver's clock to Unix seconds for the rest of the test.
func setClock(t *testing.T, unix int64) {
	t.Helper()
	old := webhookNow
	webhookNow = func() time.Time { return time.Unix(unix, 0) }
	t.Cleanup(func() { webhookNow = old })
}

func webhookHeader(id string, ts int64, sig string) http.Header {
	h := http.Header{}
	h.Set("webhook-id", id)
	h.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	h.Set("webhook-signature", sig)
	return h
}

func newSecret(t *testing.T) string {
	t.Helper()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(key)
}

// sign is the signature as the server makes it, for tests beyond the vectors.
func sign(t *testing.T, secret, id string, ts int64, body string) string {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%d.%s", id, ts, body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

func mustReject(t *testing.T, what string, payload []byte, header http.Header, secret string) error {
	t.Helper()
	ev, err := VerifyWebhook(payload, header, secret)
	if err == nil {
		t.Fatalf("%s: accepted, want rejected (event %+v)", what, ev)
	}
	if !errors.Is(err, ErrWebhookVerification) {
		t.Fatalf("%s: error %v does not wrap ErrWebhookVerification", what, err)
	}
	return err
}

func TestVerifyWebhookReferenceVector(t *testing.T) {
	setClock(t, refTimestamp)
	h := webhookHeader(refID, refTimestamp, refSignature)
	ev, err := VerifyWebhook([]byte(refBody), h, refSecret)
	if err != nil {
		t.Fatal(err)
	}
	if ev.MessageID != refID {
		t.Errorf("MessageID = %q", ev.MessageID)
	}
	// The key without its prefix, as the official libraries allow.
	if _, err := VerifyWebhook([]byte(refBody), h, strings.TrimPrefix(refSecret, "whsec_")); err != nil {
		t.Errorf("without whsec_: %v", err)
	}
	// A header map built by hand, lowercase keys.
	raw := http.Header{"webhook-id": {refID}, "webhook-timestamp": {strconv.Itoa(refTimestamp)}, "webhook-signature": {refSignature}}
	if _, err := VerifyWebhook([]byte(refBody), raw, refSecret); err != nil {
		t.Errorf("lowercase header keys: %v", err)
	}
	mustReject(t, "body changed", []byte(`{"test": 2432232315}`), h, refSecret)
	mustReject(t, "id changed", []byte(refBody), webhookHeader(refID+"x", refTimestamp, refSignature), refSecret)
	mustReject(t, "timestamp changed", []byte(refBody), webhookHeader(refID, refTimestamp+1, refSignature), refSecret)
}

type vectorCase struct {
	Name    string            `json:"name"`
	Payload string            `json:"payload"`
	Headers map[string]string `json:"headers"`
	Secret  string            `json:"secret"`
	Now     int64             `json:"now"`
	Valid   bool              `json:"valid"`
	Type    string            `json:"type"`
}

// The vectors signed by the official standardwebhooks package (Python).
func TestVerifyWebhookOfficialPackageVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/webhooks.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cases []vectorCase `json:"cases"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Cases) < 15 {
		t.Fatalf("only %d cases", len(doc.Cases))
	}
	for _, c := range doc.Cases {
		t.Run(c.Name, func(t *testing.T) {
			setClock(t, c.Now)
			h := http.Header{}
			for k, v := range c.Headers {
				h.Set(k, v)
			}
			if !c.Valid {
				mustReject(t, c.Name, []byte(c.Payload), h, c.Secret)
				return
			}
			ev, err := VerifyWebhook([]byte(c.Payload), h, c.Secret)
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type != c.Type || ev.MessageID != c.Headers["webhook-id"] {
				t.Fatalf("event %+v, want type %s", ev, c.Type)
			}
			if ev.Timestamp.IsZero() || len(ev.Data) == 0 {
				t.Fatalf("event %+v: no timestamp or data", ev)
			}
		})
	}
}

func TestWebhookEventTask(t *testing.T) {
	raw, err := os.ReadFile("testdata/webhooks.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cases []vectorCase `json:"cases"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	byName := map[string]vectorCase{}
	for _, c := range doc.Cases {
		byName[c.Name] = c
	}
	verify := func(name string) WebhookEvent {
		c := byName[name]
		setClock(t, c.Now)
		h := http.Header{}
		for k, v := range c.Headers {
			h.Set(k, v)
		}
		ev, err := VerifyWebhook([]byte(c.Payload), h, c.Secret)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return ev
	}

	ev := verify("task.succeeded")
	if ev.Type != WebhookTaskSucceeded || !ev.Timestamp.Equal(time.Date(2025, 12, 31, 23, 59, 59, 480e6, time.UTC)) {
		t.Fatalf("event %+v", ev)
	}
	task, err := ev.Task()
	if err != nil {
		t.Fatal(err)
	}
	if task.ID != "task_01JGQ4YZ0A8E6W3V9X2B5N7MKQ" || task.Status != "succeeded" || task.API != "sentiment" ||
		task.Output["note"] != "très bien ✓" || task.OutputOmitted || task.Usage.Units != 1 {
		t.Fatalf("task %+v", task)
	}

	task, err = verify("output omitted").Task()
	if err != nil {
		t.Fatal(err)
	}
	if !task.OutputOmitted || task.Output != nil {
		t.Fatalf("output omitted: task %+v", task)
	}

	task, err = verify("task.failed in test mode").Task()
	if err != nil {
		t.Fatal(err)
	}
	if task.Mode != "test" || task.Error == nil || task.Error.Code != "upstream_error" {
		t.Fatalf("failed: task %+v", task)
	}

	test := verify("webhook.test")
	if test.Type != WebhookTest {
		t.Fatalf("test event %+v", test)
	}
	if _, err := test.Task(); err == nil {
		t.Fatal("a webhook.test event gave a task")
	}
	var data map[string]any
	if err := json.Unmarshal(test.Data, &data); err != nil || data["mode"] != "live" {
		t.Fatalf("test data %s: %v", test.Data, err)
	}
}

const taskEvent = `{"type":"task.succeeded","timestamp":"2026-01-01T00:00:00Z","data":{"id":"task_1","status":"succeeded"}}`

func TestVerifyWebhookRotation(t *testing.T) {
	const ts = 1767225600
	setClock(t, ts)
	newS, oldS, other := newSecret(t), newSecret(t), newSecret(t)
	both := sign(t, oldS, "msg_1", ts, taskEvent) + " " + sign(t, newS, "msg_1", ts, taskEvent)
	h := webhookHeader("msg_1", ts, both)
	// Only the second signature is the receiver's: accepted.
	if _, err := VerifyWebhook([]byte(taskEvent), h, newS); err != nil {
		t.Fatalf("new secret: %v", err)
	}
	if _, err := VerifyWebhook([]byte(taskEvent), h, oldS); err != nil {
		t.Fatalf("old secret: %v", err)
	}
	mustReject(t, "neither secret", []byte(taskEvent), h, other)
	// Unknown versions and junk are skipped; two header lines count as one list.
	h = webhookHeader("msg_1", ts, "v2,abc v1,!!! nonsense")
	h.Add("webhook-signature", sign(t, newS, "msg_1", ts, taskEvent))
	if _, err := VerifyWebhook([]byte(taskEvent), h, newS); err != nil {
		t.Fatalf("junk then a match: %v", err)
	}
}

func TestVerifyWebhookRejects(t *testing.T) {
	const ts = 1767225600
	secret := newSecret(t)
	good := webhookHeader("msg_1", ts, sign(t, secret, "msg_1", ts, taskEvent))
	body := []byte(taskEvent)

	setClock(t, ts)
	if _, err := VerifyWebhook(body, good, secret); err != nil {
		t.Fatal(err)
	}
	mustReject(t, "tampered body", []byte(strings.Replace(taskEvent, "succeeded", "failed", 1)), good, secret)
	mustReject(t, "trailing byte", append([]byte(taskEvent), ' '), good, secret)
	mustReject(t, "wrong secret", body, good, newSecret(t))

	for _, now := range []int64{ts - 300, ts + 300} {
		setClock(t, now)
		if _, err := VerifyWebhook(body, good, secret); err != nil {
			t.Fatalf("at the tolerance's edge (%+d s): %v", now-ts, err)
		}
	}
	setClock(t, ts+301)
	if err := mustReject(t, "stale", body, good, secret); !strings.Contains(err.Error(), "too old") {
		t.Errorf("stale: %v", err)
	}
	setClock(t, ts-301)
	if err := mustReject(t, "future", body, good, secret); !strings.Contains(err.Error(), "too new") {
		t.Errorf("future: %v", err)
	}

	setClock(t, ts)
	for _, name := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
		h := good.Clone()
		h.Del(name)
		if err := mustReject(t, "no "+name, body, h, secret); !strings.Contains(err.Error(), "missing webhook header(s): "+name) {
			t.Errorf("no %s: %v", name, err)
		}
		h.Set(name, "")
		mustReject(t, "empty "+name, body, h, secret)
	}
	mustReject(t, "no headers", body, http.Header{}, secret)
	mustReject(t, "nil header", body, nil, secret)

	for _, bad := range []string{"", "1767225600.5", "-1767225600", "+1767225600", "abc", "1767225600000000000"} {
		h := good.Clone()
		h.Set("webhook-timestamp", bad)
		mustReject(t, "timestamp "+strconv.Quote(bad), body, h, secret)
	}
	for _, bad := range []string{"", "whsec_", "whsec_not base64!", "tg_live_abc-def", "whsec_%%%%"} {
		if err := mustReject(t, "secret "+strconv.Quote(bad), body, good, bad); !strings.Contains(err.Error(), "secret") {
			t.Errorf("secret %q: %v", bad, err)
		}
	}
	for _, notEvent := range []string{"not json", "[1, 2]", "null", `{"type":"x"} {}`} {
		h := webhookHeader("msg_1", ts, sign(t, secret, "msg_1", ts, notEvent))
		mustReject(t, "payload "+strconv.Quote(notEvent), []byte(notEvent), h, secret)
	}
}
