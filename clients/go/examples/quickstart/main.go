// Command quickstart is the README's quick start: it calls an API, waits for
// the task, lists the latest tasks and follows a chat task's stream.
//
//	TASKGATE_API_KEY=tg_… TASKGATE_BASE_URL=http://127.0.0.1:8080/api/v1 go run ./examples/quickstart
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	taskgate "github.com/taskgate/taskgate/clients/go"
)

func main() {
	key := os.Getenv("TASKGATE_API_KEY")
	u := os.Getenv("TASKGATE_BASE_URL")
	ctx := context.Background()

	c := taskgate.NewClient(key, taskgate.WithBaseURL(u))
	t, err := c.Call(ctx, taskgate.CallParams{API: "sentiment", Input: map[string]any{"text": "hi"}, Mode: taskgate.ModeAsync})
	if err != nil {
		var e *taskgate.Error
		if errors.As(err, &e) {
			log.Fatalf("call refused: %d %s: %s (request %s)", e.StatusCode, e.Code, e.Message, e.RequestID)
		}
		log.Fatal(err)
	}

	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	t, err = c.Tasks.Wait(wctx, t.ID) // the context bounds the wait
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(t.ID, t.Status, t.Output["label"], t.Output["score"])

	for t, err := range c.Tasks.List(ctx, taskgate.TaskListParams{Limit: 10}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(t.ID, t.API, t.Status, t.CreatedAt.Format(time.RFC3339))
	}

	// Chat replies can be followed as they are generated.
	chat, err := c.Call(ctx, taskgate.CallParams{
		API:   "chat",
		Input: map[string]any{"messages": []map[string]string{{"role": "user", "content": "Say hello"}}},
		Mode:  taskgate.ModeAsync,
	})
	if err != nil {
		log.Fatal(err)
	}
	streamed := false
	for ev, err := range c.Tasks.Stream(ctx, chat.ID) {
		if err != nil {
			log.Fatal(err)
		}
		switch ev.Type {
		case taskgate.StreamEventDelta:
			fmt.Print(ev.Text)
			streamed = true
		case taskgate.StreamEventDone:
			if !streamed { // it had finished before the stream began
				fmt.Print(ev.Task.Output["text"])
			}
			fmt.Println("\n->", ev.Task.Status)
		}
	}
}
