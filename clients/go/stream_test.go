package taskgate_test

// The stream's parsing, end and timeout, against local stub servers.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
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
