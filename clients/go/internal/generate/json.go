package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// node is a JSON value that remembers the order of its object's keys, so
// that the generated fields follow the document's order.
type node struct {
	keys   []string         // object keys in document order
	fields map[string]*node // object members (nil when not an object)
	items  []*node          // array items (nil when not an array)
	isArr  bool
	scalar any // string, json.Number, bool or nil
}

func parseJSON(data []byte) (*node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n, err := parseNode(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after the document")
	}
	return n, nil
}

func parseNode(dec *json.Decoder) (*node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n := &node{fields: map[string]*node{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				v, err := parseNode(dec)
				if err != nil {
					return nil, err
				}
				if _, dup := n.fields[k]; !dup {
					n.keys = append(n.keys, k)
				}
				n.fields[k] = v
			}
			_, err := dec.Token() // '}'
			return n, err
		case '[':
			n := &node{isArr: true, items: []*node{}}
			for dec.More() {
				v, err := parseNode(dec)
				if err != nil {
					return nil, err
				}
				n.items = append(n.items, v)
			}
			_, err := dec.Token() // ']'
			return n, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	default:
		return &node{scalar: t}, nil
	}
}

// get returns the member k of an object, or nil.
func (n *node) get(k string) *node {
	if n == nil || n.fields == nil {
		return nil
	}
	return n.fields[k]
}

// str returns the node's string value, or "".
func (n *node) str() string {
	if n == nil {
		return ""
	}
	s, _ := n.scalar.(string)
	return s
}

// strings returns the string values of a string or an array of strings.
func (n *node) strings() []string {
	if n == nil {
		return nil
	}
	if !n.isArr {
		if s, ok := n.scalar.(string); ok {
			return []string{s}
		}
		return nil
	}
	var out []string
	for _, it := range n.items {
		if s, ok := it.scalar.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// lookup follows a JSON pointer (RFC 6901). In an array, a segment is an
// index, or `name=value` for the item whose member name has that value.
func (n *node) lookup(pointer string) (*node, error) {
	if pointer == "" {
		return n, nil
	}
	if !strings.HasPrefix(pointer, "/") {
		return nil, fmt.Errorf("pointer %q does not start with /", pointer)
	}
	cur := n
	for _, seg := range strings.Split(pointer[1:], "/") {
		seg = strings.NewReplacer("~1", "/", "~0", "~").Replace(seg)
		switch {
		case cur == nil:
		case cur.isArr:
			var next *node
			if name, value, ok := strings.Cut(seg, "="); ok {
				for _, it := range cur.items {
					if it.get(name).str() == value {
						next = it
						break
					}
				}
			} else if i, err := strconv.Atoi(seg); err == nil && i >= 0 && i < len(cur.items) {
				next = cur.items[i]
			}
			cur = next
		default:
			cur = cur.get(seg)
		}
		if cur == nil {
			return nil, fmt.Errorf("pointer %q: nothing at %q", pointer, seg)
		}
	}
	return cur, nil
}

// equal reports whether two nodes are the same JSON value.
func equal(a, b *node) bool {
	switch {
	case a == nil || b == nil:
		return a == b
	case a.isArr != b.isArr, (a.fields == nil) != (b.fields == nil):
		return false
	case a.isArr:
		if len(a.items) != len(b.items) {
			return false
		}
		for i := range a.items {
			if !equal(a.items[i], b.items[i]) {
				return false
			}
		}
		return true
	case a.fields != nil:
		if len(a.fields) != len(b.fields) {
			return false
		}
		for k, v := range a.fields {
			if !equal(v, b.fields[k]) {
				return false
			}
		}
		return true
	}
	return fmt.Sprint(a.scalar) == fmt.Sprint(b.scalar) && fmt.Sprintf("%T", a.scalar) == fmt.Sprintf("%T", b.scalar)
}
