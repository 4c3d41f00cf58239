package taskgate_test

// The stream's parsing, end and timeout, against local stub servers.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	taskgate "github.com/taskgate/taskgate/clients/go"
)

// sse serves a fixed event stream.
func sse(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != "text/event-stream" {
			http.Error(w, "want Accept: text/event-stream", 400)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, body)
	}
}

func TestStreamParsesServerSentEvents(t *testing.T) {
	task := `{"id":"task_s","object":"task","api":"chat","mode":"test","status":"succeeded","output":{"text":"Hello, world"},` +
		`"error":null,"usage":{"units":1,"cost_usd":"0.000000"},"metadata":{},"created_at":"2026-11-21T13:45:12.345Z"}`
	body := ": keep-alive\n\n" +
		"event: delta\r\ndata: {\"text\":\"Hel\"}\r\n\r\n" + // CRLF lines
		"event: delta\rdata: {\"text\"\rdata: :\"lo\"}\r\r" + // CR lines, data over two lines
		"event:delta\ndata:{\"text\":\", \"}\nid: 3\n\n" + // no space after the colon
		"event: unknown\ndata: {}\n\n" + // an event a newer server may add
		": keep-alive\n\n" +
		"event: delta\ndata: {\"text\":\"world\"}\n\n" +
		"event: done\ndata: " + task + "\n\n"
	c := stub(t, sse(body))
	var deltas []string
	var final *taskgate.Task
	for ev, err := range c.Tasks.Stream(context.Background(), "task_s") {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case taskgate.StreamEventDelta:
			deltas = append(deltas, ev.Text)
		case taskgate.StreamEventDone:
			final = ev.Task
		}
	}
	if strings.Join(deltas, "|") != "Hel|lo|, |world" {
		t.Fatalf("deltas %q", deltas)
	}
	if final == nil || final.ID != "task_s" || final.Output["text"] != "Hello, world" {
		t.Fatalf("final task %+v", final)
	}
	text, task2, err := c.Tasks.StreamText(context.Background(), "task_s")
	if err != nil || text != "Hello, world" || task2.ID != "task_s" {
		t.Fatalf("StreamText: %q %v %v", text, task2, err)
	}
}

func TestStreamTextOfAFinishedTaskIsItsOutputText(t *testing.T) {
	// A task that had ended before the stream opened sends its done event alone.
	task := `{"id":"task_f","object":"task","api":"chat","mode":"test","status":"succeeded","output":{"text":"All of it"},` +
		`"error":null,"usage":{"units":1,"cost_usd":"0.000000"},"metadata":{},"created_at":"2026-11-21T13:45:12.345Z"}`
	c := stub(t, sse("event: done\ndata: "+task+"\n\n"))
	text, final, err := c.Tasks.StreamText(context.Background(), "task_f")
	if err != nil || final == nil || final.ID != "task_f" || text != "All of it" {
		t.Fatalf("StreamText: %q %v %v", text, final, err)
	}
	// A task without output text (not a chat task) gives "".
	c = stub(t, sse("event: done\ndata: "+strings.Replace(task, `{"text":"All of it"}`, `{"label":"positive"}`, 1)+"\n\n"))
	text, final, err = c.Tasks.StreamText(context.Background(), "task_f")
	if err != nil || final == nil || text != "" {
		t.Fatalf("StreamText of a task without text: %q %v %v", text, final, err)
	}
}

func TestStreamBrokenOffIsAConnectionError(t *testing.T) {
	c := stub(t, sse("event: delta\ndata: {\"text\":\"Hel\"}\n\nevent: delta\ndata: {\"te"))
	var errs []error
	var deltas int
	for ev, err := range c.Tasks.Stream(context.Background(), "task_s") {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ev.Type == taskgate.StreamEventDelta {
			deltas++
		}
	}
	if deltas != 1 || len(errs) != 1 || !taskgate.IsConnectionError(errs[0]) {
		t.Fatalf("%d deltas, errors %v", deltas, errs)
	}
}

func TestStreamStopsWhenTheLoopBreaks(t *testing.T) {
	var sent atomic.Int32
	c := stub(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i < 1000; i++ {
			if _, err := fmt.Fprintf(w, "event: delta\ndata: {\"text\":\"%d\"}\n\n", i); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			sent.Add(1)
			select {
			case <-r.Context().Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	n := 0
	for _, err := range c.Tasks.Stream(context.Background(), "task_s") {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 3 {
			break
		}
	}
	if n != 3 || sent.Load() >= 1000 {
		t.Fatalf("%d events read, %d sent", n, sent.Load())
	}
}

func TestStreamIdleTimeout(t *testing.T) {
	c := stub(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: delta\ndata: {\"text\":\"a\"}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}, taskgate.WithTimeout(200*time.Millisecond))
	var last error
	for _, err := range c.Tasks.Stream(context.Background(), "task_s") {
		last = err
	}
	var ce *taskgate.ConnectionError
	if !errors.As(last, &ce) || !ce.Timeout {
		t.Fatalf("want a timed-out connection error, got %v", last)
	}
}

func TestStreamReasoningAndToolCalls(t *testing.T) {
	task := `{"id":"task_r","object":"task","api":"chat","mode":"live","status":"succeeded",` +
		`"output":{"text":"Let me look.","reasoning":"Weather in two cities.","finish_reason":"tool_calls",` +
		`"tool_calls":[{"id":"call_a","name":"get_weather","arguments":{"city":"Paris"}},` +
		`{"id":"call_b","name":"get_time","arguments":{"tz":"Europe/Oslo"}}]},` +
		`"error":null,"usage":{"units":1,"cost_usd":"0.000000"},"metadata":{},"created_at":"2026-11-21T13:45:12.345Z"}`
	body := "event: reasoning\ndata: {\"text\":\"Weather in \"}\n\n" +
		"event: reasoning\ndata: {\"text\":\"two cities.\"}\n\n" +
		"event: reasoning\ndata: {\"text\":\"\",\"signature\":\"sig-1\"}\n\n" +
		"event: reasoning\ndata: {\"text\":\"\",\"redacted\":\"enc-1\"}\n\n" +
		"event: delta\ndata: {\"text\":\"Let me look.\"}\n\n" +
		// Two calls, their fragments interleaved; id and name on each index's first only.
		"event: tool_call\ndata: {\"index\":0,\"id\":\"call_a\",\"name\":\"get_weather\",\"arguments_delta\":\"{\\\"ci\"}\n\n" +
		"event: tool_call\ndata: {\"index\":1,\"id\":\"call_b\",\"name\":\"get_time\",\"arguments_delta\":\"\"}\n\n" +
		"event: tool_call\ndata: {\"index\":0,\"arguments_delta\":\"ty\\\":\\\"Paris\\\"}\"}\n\n" +
		"event: tool_call\ndata: {\"index\":1,\"arguments_delta\":\"{\\\"tz\\\":\\\"Europe/Oslo\\\"}\"}\n\n" +
		"event: done\ndata: " + task + "\n\n"
	c := stub(t, sse(body))

	var order []string
	var reasoning, text strings.Builder
	var signature, redacted string
	calls := map[int]*taskgate.ChatToolCall{}
	args := map[int]*strings.Builder{}
	var final *taskgate.Task
	for ev, err := range c.Tasks.Stream(context.Background(), "task_r") {
		if err != nil {
			t.Fatal(err)
		}
		order = append(order, string(ev.Type))
		switch ev.Type {
		case taskgate.StreamEventDelta:
			text.WriteString(ev.Text)
		case taskgate.StreamEventReasoning:
			if ev.Text != "" || ev.ToolCall != nil || ev.Task != nil {
				t.Fatalf("reasoning event with other fields: %+v", ev)
			}
			reasoning.WriteString(ev.Reasoning.Text)
			if ev.Reasoning.Signature != "" {
				signature = ev.Reasoning.Signature
			}
			if ev.Reasoning.Redacted != "" {
				redacted = ev.Reasoning.Redacted
			}
		case taskgate.StreamEventToolCall:
			tc := ev.ToolCall
			if calls[tc.Index] == nil {
				calls[tc.Index] = &taskgate.ChatToolCall{ID: tc.ID, Name: tc.Name}
				args[tc.Index] = &strings.Builder{}
			} else if tc.ID != "" || tc.Name != "" {
				t.Fatalf("id or name on a later fragment: %+v", tc)
			}
			args[tc.Index].WriteString(tc.ArgumentsDelta)
		case taskgate.StreamEventDone:
			final = ev.Task
		}
	}
	if got := strings.Join(order, ","); got != "reasoning,reasoning,reasoning,reasoning,delta,tool_call,tool_call,tool_call,tool_call,done" {
		t.Fatalf("event order %s", got)
	}
	if reasoning.String() != "Weather in two cities." || reasoning.String() != final.Output["reasoning"] || signature != "sig-1" || redacted != "enc-1" {
		t.Fatalf("reasoning %q, signature %q, redacted %q", reasoning.String(), signature, redacted)
	}
	if final == nil || final.ID != "task_r" {
		t.Fatalf("final task %+v", final)
	}
	var out taskgate.ChatOutput
	if err := final.DecodeOutput(&out); err != nil {
		t.Fatal(err)
	}
	if text.String() != out.Text || len(calls) != len(out.ToolCalls) {
		t.Fatalf("text %q, %d calls; output %+v", text.String(), len(calls), out)
	}
	for i, want := range out.ToolCalls {
		call := calls[i]
		if call == nil {
			t.Fatalf("no fragment of call %d", i)
		}
		if err := json.Unmarshal([]byte(args[i].String()), &call.Arguments); err != nil {
			t.Fatalf("call %d's arguments %q: %v", i, args[i].String(), err)
		}
		if !reflect.DeepEqual(*call, want) {
			t.Fatalf("call %d assembled %+v, output %+v", i, *call, want)
		}
	}

	// StreamText passes over the reasoning and tool-call events.
	whole, task2, err := c.Tasks.StreamText(context.Background(), "task_r")
	if err != nil || whole != "Let me look." || task2 == nil || task2.ID != "task_r" {
		t.Fatalf("StreamText: %q %v %v", whole, task2, err)
	}
}

func TestStreamUnreadableToolCallEventIsAnError(t *testing.T) {
	c := stub(t, sse("event: tool_call\ndata: {\"index\":\"zero\"}\n\nevent: delta\ndata: {\"text\":\"a\"}\n\n"))
	var errs []error
	events := 0
	for _, err := range c.Tasks.Stream(context.Background(), "task_s") {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		events++
	}
	if events != 0 || len(errs) != 1 || !strings.Contains(errs[0].Error(), "unreadable tool_call event") {
		t.Fatalf("%d events, errors %v", events, errs)
	}
}
