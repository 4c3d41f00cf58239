package taskgate

import (
	"context"
	"iter"
	"net/url"
	"strconv"
)

// APIsService browses the catalog of APIs the key may call. Use it as
// Client.APIs.
type APIsService struct {
	c *Client
}

// APIListParams are the filters and page size of APIs.List and
// APIs.ListPage (GET /apis). Every field may be left zero.
type APIListParams struct {
	// Limit is the page size, 1 to 100. List goes on past it, page by page.
	Limit int
	// Kind keeps the APIs of this kind, e.g. "chat" or "classification".
	Kind string
	// Provider keeps the APIs served by this provider, e.g. "builtin".
	Provider string
	// Q keeps the APIs whose slug, name or description contains this text.
	Q string
	// Cursor starts the page after the one that returned it as NextCursor
	// (ListPage only; List follows the cursors itself).
	Cursor string
}

func (p APIListParams) query() url.Values {
	q := url.Values{}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Kind != "" {
		q.Set("kind", p.Kind)
	}
	if p.Provider != "" {
		q.Set("provider", p.Provider)
	}
	if p.Q != "" {
		q.Set("q", p.Q)
	}
	if p.Cursor != "" {
		q.Set("cursor", p.Cursor)
	}
	return q
}

// ListPage returns one page of the catalog (GET /apis). Pass its NextCursor
// as Cursor, with the same filters, for the next page.
func (s *APIsService) ListPage(ctx context.Context, p APIListParams) (*APIList, error) {
	var page APIList
	if err := s.c.getJSON(ctx, "/apis", p.query(), &page); err != nil {
		return nil, err
	}
	return &page, nil
}

// List returns every API of the catalog that matches the filters, fetching
// page after page as the loop goes on. An error ends the sequence.
func (s *APIsService) List(ctx context.Context, p APIListParams) iter.Seq2[API, error] {
	return paginate(func(cursor string) ([]API, bool, string, error) {
		p.Cursor = cursor
		page, err := s.ListPage(ctx, p)
		if err != nil {
			return nil, false, "", err
		}
		return page.Items, page.HasMore, deref(page.NextCursor), nil
	}, p.Cursor)
}

// Get returns one API with its input and output JSON Schemas, examples and
// limits (GET /apis/{slug}). An unknown slug is a 404 error (IsNotFound).
func (s *APIsService) Get(ctx context.Context, slug string) (*APIDetails, error) {
	var a APIDetails
	if err := s.c.getJSON(ctx, "/apis/"+pathEscape(slug), nil, &a); err != nil {
		return nil, err
	}
	return &a, nil
}
