package provider

import (
	"container/list"
	"sync"
)

// store keeps responses by id, at most max of them: the oldest is forgotten
// to make room for a new one. Create it with newStore. It is safe for
// concurrent use.
type store struct {
	mu    sync.Mutex
	max   int
	byID  map[string]*list.Element
	order list.List // of *response, oldest first
}

// newStore is an empty store for at most max responses; max must be
// positive.
func newStore(max int) *store {
	return &store{max: max, byID: map[string]*list.Element{}}
}

// put keeps r, forgetting the oldest response if the store is full.
func (s *store) put(r *response) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.order.Len() >= s.max {
		oldest := s.order.Remove(s.order.Front()).(*response)
		delete(s.byID, oldest.id)
	}
	s.byID[r.id] = s.order.PushBack(r)
}

// get is the response kept under id, or nil.
func (s *store) get(id string) *response {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.byID[id]; ok {
		return e.Value.(*response)
	}
	return nil
}

// remove forgets the response kept under id and reports whether there was
// one.
func (s *store) remove(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byID[id]
	if ok {
		s.order.Remove(e)
		delete(s.byID, id)
	}
	return ok
}

// len is how many responses the store keeps.
func (s *store) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.order.Len()
}
