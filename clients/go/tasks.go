package taskgate

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// TasksService reads, lists, cancels, waits for and streams tasks. Use it
// as Client.Tasks.
type TasksService struct {
	c *Client
}

// Terminal reports whether a task in status s has ended (succeeded, failed
// or cancelled): terminal statuses never change again.
func (s TaskStatus) Terminal() bool {
	return s == TaskStatusSucceeded || s == TaskStatusFailed || s == TaskStatusCancelled
}

// DecodeOutput decodes the task's output into v (a pointer to a struct or a
// map), e.g. a struct with the fields of the API's output schema.
func (t *Task) DecodeOutput(v any) error {
	b, err := json.Marshal(t.Output)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// Get returns a task with its input, events and attempts (GET /tasks/{id}).
// An unknown id is a 404 error (IsNotFound).
func (s *TasksService) Get(ctx context.Context, id string) (*TaskDetails, error) {
	var t TaskDetails
	if err := s.c.getJSON(ctx, "/tasks/"+pathEscape(id), nil, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// Retrieve returns the task object as GET /call/{id} shows it (without the
// details that Get adds).
func (s *TasksService) Retrieve(ctx context.Context, id string) (*Task, error) {
	var t Task
	if err := s.c.getJSON(ctx, "/call/"+pathEscape(id), nil, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// Cancel cancels a queued or running task (POST /tasks/{id}/cancel) and
// returns it, cancelled. Cancelling a cancelled task returns it unchanged;
// a succeeded or failed one is a 409 error (IsConflict).
func (s *TasksService) Cancel(ctx context.Context, id string) (*Task, error) {
	// Idempotent by the contract, so safe to retry.
	resp, err := s.c.send(ctx, request{method: http.MethodPost, path: "/tasks/" + pathEscape(id) + "/cancel", retryable: true})
	if err != nil {
		return nil, err
	}
	var t Task
	if err := decodeData(resp.body, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// Wait polls the task (GET /call/{id}) until it ends (succeeded, failed or
// cancelled) and returns it. It polls after 0.25 s, then 1.5 times longer
// each time, at most every 2 s. The context bounds the wait: give it a
// deadline, and when that passes Wait returns the context's error
// (context.DeadlineExceeded).
func (s *TasksService) Wait(ctx context.Context, id string) (*Task, error) {
	delay := 250 * time.Millisecond
	for {
		t, err := s.Retrieve(ctx, id)
		if err != nil {
			return nil, err
		}
		if t.Status.Terminal() {
			return t, nil
		}
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-timer.C:
		}
		delay = min(delay*3/2, 2*time.Second)
	}
}

// TaskListParams are the filters and page size of Tasks.List and
// Tasks.ListPage (GET /tasks). Every field may be left zero.
type TaskListParams struct {
	// Limit is the page size, 1 to 100 (the service's default is 20). List
	// goes on past it, page by page, to the last task.
	Limit int
	// API keeps the tasks of this API slug only.
	API string
	// Status keeps the tasks in any of these statuses.
	Status []TaskStatus
	// CreatedAfter keeps the tasks created strictly after this time.
	CreatedAfter time.Time
	// CreatedBefore keeps the tasks created strictly before this time.
	CreatedBefore time.Time
	// Order is OrderDesc (newest first, the default) or OrderAsc.
	Order Order
	// Cursor starts the page after the one that returned it as NextCursor
	// (ListPage only; List follows the cursors itself).
	Cursor string
}

func (p TaskListParams) query() url.Values {
	q := url.Values{}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.API != "" {
		q.Set("api", p.API)
	}
	if len(p.Status) > 0 {
		s := make([]string, len(p.Status))
		for i, v := range p.Status {
			s[i] = string(v)
		}
		q.Set("status", strings.Join(s, ","))
	}
	if !p.CreatedAfter.IsZero() {
		q.Set("created_after", formatTime(p.CreatedAfter))
	}
	if !p.CreatedBefore.IsZero() {
		q.Set("created_before", formatTime(p.CreatedBefore))
	}
	if p.Order != "" {
		q.Set("order", string(p.Order))
	}
	if p.Cursor != "" {
		q.Set("cursor", p.Cursor)
	}
	return q
}

// formatTime writes t as the service's timestamps are written: RFC 3339 in
// UTC with milliseconds.
func formatTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// ListPage returns one page of tasks (GET /tasks), newest first unless
// Order says otherwise. Pass its NextCursor as Cursor, with the same
// filters, for the next page; HasMore says whether there is one.
func (s *TasksService) ListPage(ctx context.Context, p TaskListParams) (*TaskList, error) {
	var page TaskList
	if err := s.c.getJSON(ctx, "/tasks", p.query(), &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// List returns every task that matches the filters, fetching page after
// page of p.Limit tasks as the loop goes on:
//
//	for t, err := range c.Tasks.List(ctx, taskgate.TaskListParams{Limit: 10}) {
//		if err != nil { … }
//		fmt.Println(t.ID, t.Status)
//	}
//
// An error ends the sequence. List items have no output (Output is nil):
// use Tasks.Get or Tasks.Retrieve for it.
func (s *TasksService) List(ctx context.Context, p TaskListParams) iter.Seq2[Task, error] {
	return paginate(func(cursor string) ([]Task, bool, string, error) {
		p.Cursor = cursor
		page, err := s.ListPage(ctx, p)
		if err != nil {
			return nil, false, "", err
		}
		return page.Items, page.HasMore, deref(page.NextCursor), nil
	}, p.Cursor)
}

// paginate yields the items of page after page, fetched by next from a
// cursor, until a page says there is no more or the loop stops.
func paginate[T any](next func(cursor string) (items []T, hasMore bool, nextCursor string, err error), cursor string) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for {
			items, more, nextCursor, err := next(cursor)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, it := range items {
				if !yield(it, nil) {
					return
				}
			}
			if !more || nextCursor == "" {
				return
			}
			cursor = nextCursor
		}
	}
}

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
