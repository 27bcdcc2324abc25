package idempotency

import (
	"bytes"
	"net/http"
	"slices"
)

// recorder buffers a handler's response so it can be stored before it is
// sent. Past max bytes it stops buffering: without work attached to the
// request the response streams to the client unstored; with some, or in
// the transactional mode, it is discarded (it could not be committed with
// it).
type recorder struct {
	w      http.ResponseWriter
	st     *state
	max    int
	replay headerSet

	header      http.Header
	status      int
	wroteHeader bool
	hsize       int // size of the headers that would be stored
	buf         bytes.Buffer
	streaming   bool
	discarded   bool
}

func newRecorder(w http.ResponseWriter, st *state, max int, replay headerSet) *recorder {
	return &recorder{w: w, st: st, max: max, replay: replay, header: http.Header{}}
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.wroteHeader || code < 200 {
		return
	}
	r.wroteHeader = true
	r.status = code
	for k, vs := range r.header {
		if r.replay.has(http.CanonicalHeaderKey(k)) {
			for _, v := range vs {
				r.hsize += len(k) + len(v)
			}
		}
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	if !r.wroteHeader {
		if r.header.Get("Content-Type") == "" && len(p) > 0 {
			r.header.Set("Content-Type", http.DetectContentType(p))
		}
		r.WriteHeader(http.StatusOK)
	}
	switch {
	case r.streaming:
		return r.w.Write(p)
	case r.discarded:
		return len(p), nil
	case r.hsize+r.buf.Len()+len(p) <= r.max:
		return r.buf.Write(p)
	}
	r.st.mu.Lock()
	if len(r.st.work) > 0 || r.st.tx != nil {
		r.discarded = true
	} else {
		r.streaming = true
		r.st.streamed = true
	}
	r.st.mu.Unlock()
	if r.discarded {
		r.buf = bytes.Buffer{}
		return len(p), nil
	}
	r.sendHeader()
	if _, err := r.w.Write(r.buf.Bytes()); err != nil {
		return 0, err
	}
	r.buf = bytes.Buffer{}
	return r.w.Write(p)
}

// sendHeader copies every header the handler set (Set-Cookie included:
// only the stored copy is filtered) and the status to the client.
func (r *recorder) sendHeader() {
	h := r.w.Header()
	for k, vs := range r.header {
		h[k] = slices.Clone(vs)
	}
	r.w.WriteHeader(r.status)
}

// response is what the handler wrote (all headers).
func (r *recorder) response() Response {
	if !r.wroteHeader {
		r.WriteHeader(http.StatusOK)
	}
	return Response{Status: r.status, Header: r.header, Body: r.buf.Bytes()}
}

// deliver sends the buffered response.
func (r *recorder) deliver() {
	r.sendHeader()
	_, _ = r.w.Write(r.buf.Bytes())
}

// stored is resp with only the allow-listed headers, under their
// canonical names.
func stored(resp Response, replay headerSet) Response {
	h := http.Header{}
	for k, vs := range resp.Header {
		if k = http.CanonicalHeaderKey(k); replay.has(k) {
			h[k] = append(h[k], vs...)
		}
	}
	return Response{Status: resp.Status, Header: h, Body: resp.Body}
}
