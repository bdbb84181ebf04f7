package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/fsnotify/fsnotify"
)

// A CRI log file holds one record a line: "<RFC3339Nano time> <stdout|stderr> <tag> <text>",
// where the tag is F for the end of a line and P for a part of a longer one (more tags may
// follow, separated by ':').

// record is one line of a CRI log file.
type record struct {
	ts      time.Time
	stream  int // streamStdout or streamStderr
	partial bool
	text    []byte // without the newline
}

const (
	streamStdout = iota
	streamStderr
	numStreams
)

// timestampLayout is how timestamps=true prefixes lines: nanoseconds always nine digits, so
// that lines sort by their prefix.
const timestampLayout = "2006-01-02T15:04:05.000000000Z07:00"

// errLimitReached ends a read once limitBytes were written.
var errLimitReached = errors.New("log byte limit reached")

// parseRecord parses one line (without its newline).
func parseRecord(line []byte) (record, error) {
	var r record
	field := func() ([]byte, bool) {
		i := bytes.IndexByte(line, ' ')
		if i < 0 {
			f := line
			line = nil
			return f, false
		}
		f := line[:i]
		line = line[i+1:]
		return f, true
	}
	ts, ok := field()
	if !ok {
		return r, fmt.Errorf("no stream after the time in %q", ts)
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return r, fmt.Errorf("bad time %q", ts)
	}
	r.ts = t
	stream, ok := field()
	switch string(stream) {
	case "stdout":
		r.stream = streamStdout
	case "stderr":
		r.stream = streamStderr
	default:
		return r, fmt.Errorf("unknown stream %q", stream)
	}
	if !ok {
		return r, errors.New("no tag after the stream")
	}
	tag, _ := field()
	if i := bytes.IndexByte(tag, ':'); i >= 0 {
		tag = tag[:i]
	}
	switch string(tag) {
	case "F":
	case "P":
		r.partial = true
	default:
		return r, fmt.Errorf("unknown tag %q", tag)
	}
	r.text = line
	return r, nil
}

// lineState is where a stream's output stands: inside a line (after a partial record),
// and whether that line is left out.
type lineState struct{ mid, drop bool }

// logWriter writes records as the client asked: the chosen streams, lines from since on,
// timestamps, at most limitBytes.
type logWriter struct {
	w       io.Writer
	flusher http.Flusher
	opts    logOptions
	written int64
	state   [numStreams]lineState
	buf     []byte
}

func newLogWriter(w io.Writer, opts logOptions) *logWriter {
	lw := &logWriter{w: w, opts: opts}
	lw.flusher, _ = w.(http.Flusher)
	return lw
}

func (lw *logWriter) selected(stream int) bool {
	if stream == streamStdout {
		return lw.opts.stdout
	}
	return lw.opts.stderr
}

// write writes one record. A line is kept or left out as a whole, as its first record
// decides.
func (lw *logWriter) write(r record) error {
	st := &lw.state[r.stream]
	start := !st.mid
	if start {
		st.drop = !lw.selected(r.stream) || (!lw.opts.since.IsZero() && r.ts.Before(lw.opts.since))
	}
	st.mid = r.partial
	if st.drop {
		return nil
	}
	b := lw.buf[:0]
	if lw.opts.timestamps && start {
		b = r.ts.AppendFormat(b, timestampLayout)
		b = append(b, ' ')
	}
	b = append(b, r.text...)
	if !r.partial {
		b = append(b, '\n')
	}
	lw.buf = b
	var limited bool
	if lw.opts.limitBytes > 0 && lw.written+int64(len(b)) >= lw.opts.limitBytes {
		b = b[:lw.opts.limitBytes-lw.written]
		limited = true
	}
	n, err := lw.w.Write(b)
	lw.written += int64(n)
	if err != nil {
		return err
	}
	if limited {
		return errLimitReached
	}
	return nil
}

func (lw *logWriter) flush() {
	if lw.flusher != nil {
		lw.flusher.Flush()
	}
}

// logReader copies a CRI log file to a logWriter, following it as it grows when running
// is set.
type logReader struct {
	file *os.File
	opts logOptions
	out  *logWriter
	// running says whether the container still runs; nil: do not follow.
	running func(context.Context) bool
	// recheck is how often running is asked while the file does not grow.
	recheck time.Duration
}

// copy writes the file's records from where tailLines says, and then, when following,
// the records written later, until the container stops running or ctx ends.
func (lr *logReader) copy(ctx context.Context) error {
	defer lr.out.flush()
	if err := lr.seekTail(); err != nil {
		return err
	}
	br := bufio.NewReaderSize(lr.file, 64<<10)
	var pending []byte // a line not yet ended by a newline
	var watcher *fsnotify.Watcher
	defer func() {
		if watcher != nil {
			watcher.Close()
		}
	}()
	final := lr.running == nil
	for {
		line, err := br.ReadBytes('\n')
		if err == nil {
			if len(pending) > 0 {
				line = append(pending, line...)
				pending = pending[:0]
			}
			if err := lr.emit(ctx, line[:len(line)-1]); err != nil {
				return err
			}
			continue
		}
		if err != io.EOF {
			return fmt.Errorf("read %s: %w", lr.file.Name(), err)
		}
		pending = append(pending, line...)
		if final {
			// A line the runtime had not finished: what there is of it.
			if len(pending) > 0 {
				return lr.emit(ctx, pending)
			}
			return nil
		}
		lr.out.flush()
		if watcher == nil {
			watcher = lr.watch()
		}
		more, err := lr.wait(ctx, watcher)
		if err != nil {
			return err
		}
		final = !more
	}
}

// emit writes one line of the file; lines that do not parse are skipped.
func (lr *logReader) emit(ctx context.Context, line []byte) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r, err := parseRecord(line)
	if err != nil {
		return nil
	}
	return lr.out.write(r)
}

// watch watches the file for writes; nil when that is not possible (the periodic recheck
// then finds new records).
func (lr *logReader) watch() *fsnotify.Watcher {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil
	}
	if err := w.Add(lr.file.Name()); err != nil {
		w.Close()
		return nil
	}
	return w
}

// wait returns once the file may have grown (true) or the container stopped running
// (false: read what is left and end).
func (lr *logReader) wait(ctx context.Context, w *fsnotify.Watcher) (bool, error) {
	var events chan fsnotify.Event
	var errs chan error
	if w != nil {
		events, errs = w.Events, w.Errors
	}
	timer := time.NewTimer(lr.recheck)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-events:
		return true, nil
	case <-errs:
		return true, nil
	case <-timer.C:
		return lr.running(ctx), nil
	}
}

// seekTail moves the file to where the last tailLines lines (of the chosen streams)
// start, and marks the streams that are inside a line there, so that the rest of that
// line is left out.
func (lr *logReader) seekTail() error {
	if lr.opts.tail < 0 {
		return nil
	}
	type start struct {
		offset int64
		mid    [numStreams]bool
	}
	n := int(lr.opts.tail)
	ring := make([]start, 0, min(n, 1024))
	next := 0 // the ring's oldest entry once it is full
	var mid [numStreams]bool
	var offset int64
	br := bufio.NewReaderSize(lr.file, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			body := line
			if body[len(body)-1] == '\n' {
				body = body[:len(body)-1]
			}
			if r, perr := parseRecord(body); perr == nil {
				if !mid[r.stream] && lr.out.selected(r.stream) && n > 0 {
					s := start{offset: offset, mid: mid}
					if len(ring) < n {
						ring = append(ring, s)
					} else {
						ring[next] = s
						next = (next + 1) % n
					}
				}
				mid[r.stream] = r.partial
			}
			offset += int64(len(line))
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", lr.file.Name(), err)
		}
	}
	from := start{offset: offset, mid: mid} // tailLines=0: nothing of what is there now
	if len(ring) > 0 {
		from = ring[next] // the oldest of the last n line starts (next is 0 until the ring is full)
	}
	for s := range from.mid {
		if from.mid[s] {
			lr.out.state[s] = lineState{mid: true, drop: true}
		}
	}
	_, err := lr.file.Seek(from.offset, io.SeekStart)
	return err
}
