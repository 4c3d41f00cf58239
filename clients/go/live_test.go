package taskgate_test

// Tests against a real Taskgate server started by scripts/with-server.sh.
// They skip without one, unless CI=true.

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	taskgate "github.com/taskgate/taskgate/clients/go"
)

var bg = context.Background()

func sentiment(text string) taskgate.CallParams {
	return taskgate.CallParams{API: "sentiment", Input: map[string]any{"text": text}}
}

func TestDefaultsFromTheEnvironment(t *testing.T) {
	base := env(t, "TASKGATE_BASE_URL")
	env(t, "TASKGATE_API_KEY")
	c := taskgate.NewClient("")
	if c.BaseURL() != strings.TrimRight(base, "/") {
		t.Fatalf("base URL %q, want TASKGATE_BASE_URL %q", c.BaseURL(), base)
	}
	task, err := c.Call(bg, sentiment("I love this"))
	if err != nil {
		t.Fatal(err)
	}
	if task.Status != taskgate.TaskStatusSucceeded || task.Mode != "live" {
		t.Fatalf("task %+v", task)
	}
}

func TestCallSync(t *testing.T) {
	c := live(t, "TASKGATE_API_KEY")
	p := sentiment("I love this")
	p.Metadata = map[string]string{"order": "1234"}
	task, err := c.Call(bg, p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(task.ID, "task_") || task.Object != "task" || task.API != "sentiment" || task.Mode != "live" {
		t.Fatalf("task %+v", task)
	}
	if task.Status != taskgate.TaskStatusSucceeded || !task.Status.Terminal() || task.Error != nil {
		t.Fatalf("status %s error %+v", task.Status, task.Error)
	}
	if task.Output["label"] != "positive" || task.Metadata["order"] != "1234" {
		t.Fatalf("output %v metadata %v", task.Output, task.Metadata)
	}
	var out struct {
		Label string  `json:"label"`
		Score float64 `json:"score"`
	}
	if err := task.DecodeOutput(&out); err != nil || out.Label != "positive" || out.Score <= 0 {
		t.Fatalf("DecodeOutput: %+v %v", out, err)
	}
	if task.Usage.Units != 1 || task.Usage.CostUSD == "" || task.CreatedAt.IsZero() ||
		task.StartedAt == nil || task.CompletedAt == nil || task.DurationMS == nil {
		t.Fatalf("usage %+v times %v %v %v %v", task.Usage, task.CreatedAt, task.StartedAt, task.CompletedAt, task.DurationMS)
	}
	if !strings.HasPrefix(c.LastRequestID(), "req_") {
		t.Fatalf("last request id %q", c.LastRequestID())
	}
	if c.LastRateLimit().Present() {
		t.Fatalf("an unlimited plan sent rate-limit headers: %+v", c.LastRateLimit())
	}
}

func TestCallAsyncWaitAndGet(t *testing.T) {
	c := live(t, "TASKGATE_TEST_KEY")
	p := sentiment("so slow")
	p.Mode = taskgate.ModeAsync
	p.Sandbox = &taskgate.Sandbox{DelayMS: 800}
	task, err := c.Call(bg, p)
	if err != nil {
		t.Fatal(err)
	}
	if task.Status.Terminal() || task.Mode != "test" {
		t.Fatalf("async task already %s (mode %s)", task.Status, task.Mode)
	}
	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	done, err := c.Tasks.Wait(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.ID != task.ID || done.Status != taskgate.TaskStatusSucceeded || done.Output == nil {
		t.Fatalf("waited task %+v", done)
	}

	d, err := c.Tasks.Get(bg, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != task.ID || d.Input["text"] != "so slow" || !strings.HasPrefix(d.KeyID, "key_") || d.IdempotencyKey == nil {
		t.Fatalf("details %+v", d)
	}
	var statuses []string
	for _, e := range d.Events {
		statuses = append(statuses, string(e.Status))
		if e.At.IsZero() {
			t.Fatalf("event without a time: %+v", e)
		}
	}
	if strings.Join(statuses, ",") != "queued,running,succeeded" {
		t.Fatalf("events %v", statuses)
	}
	if len(d.Attempts) != 1 || d.Attempts[0].Provider != "sandbox" || d.Attempts[0].Outcome != "succeeded" {
		t.Fatalf("attempts %+v", d.Attempts)
	}
}

func TestSandboxFailure(t *testing.T) {
	c := live(t, "TASKGATE_TEST_KEY")
	p := sentiment("fail me")
	p.Sandbox = &taskgate.Sandbox{Outcome: taskgate.SandboxOutcomeFailed, ErrorCode: taskgate.SandboxErrorCodeUpstreamTimeout}
	task, err := c.Call(bg, p)
	if err != nil {
		t.Fatal(err)
	}
	if task.Status != taskgate.TaskStatusFailed || task.Error == nil || task.Error.Code != "upstream_timeout" {
		t.Fatalf("task %+v error %+v", task, task.Error)
	}
}

func TestWaitIsBoundedByTheContext(t *testing.T) {
	c := live(t, "TASKGATE_TEST_KEY")
	p := sentiment("slow")
	p.Mode = taskgate.ModeAsync
	p.Sandbox = &taskgate.Sandbox{DelayMS: 5000}
	task, err := c.Call(bg, p)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 400*time.Millisecond)
	defer cancel()
	_, err = c.Tasks.Wait(ctx, task.ID)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want context.DeadlineExceeded, got %v", err)
	}
	if _, err := c.Tasks.Cancel(bg, task.ID); err != nil {
		t.Fatal(err)
	}
}

func TestCancel(t *testing.T) {
	c := live(t, "TASKGATE_TEST_KEY")
	p := sentiment("cancel me")
	p.Mode = taskgate.ModeAsync
	p.Sandbox = &taskgate.Sandbox{DelayMS: 5000}
	task, err := c.Call(bg, p)
	if err != nil {
		t.Fatal(err)
	}
	cancelled, err := c.Tasks.Cancel(bg, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cancelled.ID != task.ID || cancelled.Status != taskgate.TaskStatusCancelled {
		t.Fatalf("cancelled task %+v", cancelled)
	}
	again, err := c.Tasks.Cancel(bg, task.ID)
	if err != nil || again.Status != taskgate.TaskStatusCancelled {
		t.Fatalf("second cancel: %+v %v", again, err)
	}
	waited, err := c.Tasks.Wait(bg, task.ID)
	if err != nil || waited.Status != taskgate.TaskStatusCancelled {
		t.Fatalf("wait on a cancelled task: %+v %v", waited, err)
	}
}

func TestTasksListPaginates(t *testing.T) {
	c := live(t, "TASKGATE_API_KEY")
	run := unique(t)
	start := time.Now().Add(-time.Second)
	var made []string
	for i := 0; i < 25; i++ {
		task, err := c.Call(bg, taskgate.CallParams{
			API: "token-count", Input: map[string]any{"text": "hello"}, Metadata: map[string]string{"run": run},
		})
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, task.ID)
	}
	filters := taskgate.TaskListParams{Limit: 10, API: "token-count", CreatedAfter: start}

	// The iterator: all 25, newest first.
	var listed []string
	for task, err := range c.Tasks.List(bg, filters) {
		if err != nil {
			t.Fatal(err)
		}
		if task.Metadata["run"] == run {
			listed = append(listed, task.ID)
		}
		if task.Output != nil {
			t.Fatalf("a list item has an output: %+v", task)
		}
	}
	if len(listed) != 25 || listed[0] != made[24] || listed[24] != made[0] {
		t.Fatalf("listed %d tasks (first %v), want the 25 made, newest first", len(listed), listed[:min(len(listed), 1)])
	}

	// Page by page: 10, 10, 5.
	var sizes []int
	p := filters
	p.Order = taskgate.OrderAsc
	var asc []string
	for {
		page, err := c.Tasks.ListPage(bg, p)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(page.Items))
		for _, task := range page.Items {
			asc = append(asc, task.ID)
		}
		if !page.HasMore {
			if page.NextCursor != nil {
				t.Fatalf("last page has a cursor %q", *page.NextCursor)
			}
			break
		}
		p.Cursor = *page.NextCursor
	}
	if len(sizes) != 3 || sizes[0] != 10 || sizes[1] != 10 || sizes[2] != 5 {
		t.Fatalf("page sizes %v, want [10 10 5]", sizes)
	}
	if strings.Join(asc, ",") != strings.Join(made, ",") {
		t.Fatalf("ascending order differs from creation order")
	}

	// Stopping the loop early stops the paging.
	n := 0
	for _, err := range c.Tasks.List(bg, filters) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 12 {
			break
		}
	}

	// Status filters.
	f := filters
	f.Status = []taskgate.TaskStatus{taskgate.TaskStatusFailed, taskgate.TaskStatusCancelled}
	for task, err := range c.Tasks.List(bg, f) {
		t.Fatalf("failed or cancelled filter listed %+v %v", task, err)
	}
	f.Status = []taskgate.TaskStatus{taskgate.TaskStatusSucceeded}
	count := 0
	for _, err := range c.Tasks.List(bg, f) {
		if err != nil {
			t.Fatal(err)
		}
		count++
	}
	if count != 25 {
		t.Fatalf("succeeded filter listed %d, want 25", count)
	}
}

func TestAPIsListAndGet(t *testing.T) {
	c := live(t, "TASKGATE_API_KEY")
	var slugs []string
	for api, err := range c.APIs.List(bg, taskgate.APIListParams{Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		if api.Object != "api" || api.Name == "" || api.Kind == "" || api.Pricing.Unit == "" {
			t.Fatalf("api %+v", api)
		}
		slugs = append(slugs, api.Slug)
	}
	if strings.Join(slugs, ",") != "chat,embed,language-detect,sentiment,token-count" {
		t.Fatalf("catalog %v", slugs)
	}
	pages := 0
	p := taskgate.APIListParams{Limit: 2}
	for {
		page, err := c.APIs.ListPage(bg, p)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if !page.HasMore {
			break
		}
		p.Cursor = *page.NextCursor
	}
	if pages != 3 {
		t.Fatalf("%d pages of 2, want 3", pages)
	}

	var chats []string
	for api, err := range c.APIs.List(bg, taskgate.APIListParams{Kind: "chat"}) {
		if err != nil {
			t.Fatal(err)
		}
		chats = append(chats, api.Slug)
	}
	if strings.Join(chats, ",") != "chat" {
		t.Fatalf("kind chat: %v", chats)
	}

	api, err := c.APIs.Get(bg, "sentiment")
	if err != nil {
		t.Fatal(err)
	}
	if api.Slug != "sentiment" || api.Kind != "classification" || api.InputSchema["type"] != "object" ||
		api.OutputSchema == nil || api.Limits.TimeoutMS <= 0 || api.Limits.MaxInputBytes <= 0 || len(api.Examples) == 0 {
		t.Fatalf("api %+v", api)
	}
}

func TestStream(t *testing.T) {
	c := live(t, "TASKGATE_TEST_KEY")
	task, err := c.Call(bg, taskgate.CallParams{
		API:     "chat",
		Input:   map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}},
		Mode:    taskgate.ModeAsync,
		Sandbox: &taskgate.Sandbox{DelayMS: 1000},
	})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	deltas := 0
	var final *taskgate.Task
	for ev, err := range c.Tasks.Stream(bg, task.ID) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case taskgate.StreamEventDelta:
			deltas++
			text.WriteString(ev.Text)
		case taskgate.StreamEventDone:
			final = ev.Task
		}
	}
	if final == nil || final.ID != task.ID || final.Status != taskgate.TaskStatusSucceeded {
		t.Fatalf("final task %+v", final)
	}
	if deltas < 2 || text.String() != final.Output["text"] {
		t.Fatalf("%d deltas %q, output %q", deltas, text.String(), final.Output["text"])
	}

	// A finished task's stream is its done event at once; StreamText still
	// returns the whole text (the task's output.text).
	whole, done, err := c.Tasks.StreamText(bg, task.ID)
	if err != nil || done.ID != task.ID || whole != text.String() {
		t.Fatalf("StreamText of a finished task: %q (want %q) %v %v", whole, text.String(), done, err)
	}
}

// A test-mode chat task that calls a tool streams the call as tool_call
// events (test mode sends each call whole, in one fragment); assembled by
// index they are the output's tool calls.
func TestStreamToolCall(t *testing.T) {
	c := live(t, "TASKGATE_TEST_KEY")
	task, err := c.Call(bg, taskgate.CallParams{
		API: "chat",
		Input: taskgate.ChatInput{
			Messages: []taskgate.ChatMessage{{Role: "user", Content: "What is the weather in Paris?"}},
			Tools: []taskgate.ChatTool{{
				Name: "get_weather",
				Parameters: map[string]any{
					"type":       "object",
					"properties": map[string]any{"city": map[string]any{"type": "string"}},
					"required":   []string{"city"},
				},
			}},
			ToolChoice: map[string]any{"name": "get_weather"},
		},
		Mode:    taskgate.ModeAsync,
		Sandbox: &taskgate.Sandbox{DelayMS: 1000},
	})
	if err != nil {
		t.Fatal(err)
	}
	var calls []taskgate.ChatToolCall
	var args []string
	var final *taskgate.Task
	for ev, err := range c.Tasks.Stream(bg, task.ID) {
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Type {
		case taskgate.StreamEventToolCall:
			for len(calls) <= ev.ToolCall.Index {
				calls = append(calls, taskgate.ChatToolCall{})
				args = append(args, "")
			}
			call := &calls[ev.ToolCall.Index]
			if ev.ToolCall.ID != "" {
				call.ID, call.Name = ev.ToolCall.ID, ev.ToolCall.Name
			}
			args[ev.ToolCall.Index] += ev.ToolCall.ArgumentsDelta
		case taskgate.StreamEventDone:
			final = ev.Task
		}
	}
	if final == nil || final.Status != taskgate.TaskStatusSucceeded {
		t.Fatalf("final task %+v", final)
	}
	var out taskgate.ChatOutput
	if err := final.DecodeOutput(&out); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || len(out.ToolCalls) != 1 {
		t.Fatalf("streamed calls %+v, output %+v", calls, out)
	}
	if err := json.Unmarshal([]byte(args[0]), &calls[0].Arguments); err != nil {
		t.Fatalf("arguments %q: %v", args[0], err)
	}
	if !reflect.DeepEqual(calls[0], out.ToolCalls[0]) {
		t.Fatalf("streamed call %+v, output's %+v", calls[0], out.ToolCalls[0])
	}
}

// A tool call round trip on the chat API, with the generated chat types:
// test mode answers a forced tool with a call whose arguments follow the
// tool's parameters, and takes the conversation back with the call and the
// tool's result.
func TestChatToolCallRoundTrip(t *testing.T) {
	c := live(t, "TASKGATE_TEST_KEY")
	tools := []taskgate.ChatTool{{
		Name:        "get_weather",
		Description: "The current weather in a city",
		Parameters: map[string]any{
			"type":       "object",
			"properties": map[string]any{"city": map[string]any{"type": "string"}},
			"required":   []string{"city"},
		},
	}}
	messages := []taskgate.ChatMessage{{Role: "user", Content: "What is the weather in Paris?"}}
	task, err := c.Call(bg, taskgate.CallParams{API: "chat", Input: taskgate.ChatInput{
		Messages:   messages,
		Tools:      tools,
		ToolChoice: map[string]any{"name": "get_weather"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if task.Status != taskgate.TaskStatusSucceeded || task.Mode != "test" {
		t.Fatalf("task %+v", task)
	}
	var out taskgate.ChatOutput
	if err := task.DecodeOutput(&out); err != nil {
		t.Fatal(err)
	}
	if out.FinishReason != taskgate.ChatFinishReasonToolCalls || len(out.ToolCalls) != 1 {
		t.Fatalf("output %+v", out)
	}
	call := out.ToolCalls[0]
	if city, ok := call.Arguments["city"].(string); call.ID == "" || call.Name != "get_weather" || !ok || city == "" {
		t.Fatalf("tool call %+v", call)
	}

	messages = append(messages,
		taskgate.ChatMessage{Role: "assistant", ToolCalls: out.ToolCalls},
		taskgate.ChatMessage{Role: "tool", ToolCallID: call.ID, Content: `{"temp_c": 21}`},
	)
	task, err = c.Call(bg, taskgate.CallParams{API: "chat", Input: taskgate.ChatInput{
		Messages: messages,
		Tools:    tools,
	}})
	if err != nil {
		t.Fatal(err)
	}
	out = taskgate.ChatOutput{}
	if err := task.DecodeOutput(&out); err != nil {
		t.Fatal(err)
	}
	if task.Status != taskgate.TaskStatusSucceeded || out.Text == "" || len(out.ToolCalls) != 0 || out.FinishReason != taskgate.ChatFinishReasonStop {
		t.Fatalf("task %s output %+v", task.Status, out)
	}
}
