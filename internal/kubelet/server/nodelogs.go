package server

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"strings"
	"time"
)

// nodeLogs serves GET /logs/ as a kubelet serves its node's /var/log: a directory whose
// pods/ holds the pods' log directories (Config.PodLogsDir), listed and read as files.
func (s *Server) nodeLogs() http.Handler {
	return http.StripPrefix("/logs/", http.FileServerFS(nodeLogFS{pods: os.DirFS(s.cfg.PodLogsDir)}))
}

// nodeLogFS is the node's log directory: pods (the pod log directories) and nothing else.
type nodeLogFS struct{ pods fs.FS }

func (f nodeLogFS) Open(name string) (fs.File, error) {
	switch {
	case !fs.ValidPath(name):
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	case name == ".":
		return &logRoot{}, nil
	case name == "pods":
		return f.pods.Open(".")
	case strings.HasPrefix(name, "pods/"):
		return f.pods.Open(strings.TrimPrefix(name, "pods/"))
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

// logRoot is the log directory itself, whose one entry is pods/.
type logRoot struct{ listed bool }

func (d *logRoot) Stat() (fs.FileInfo, error) { return dirInfo("."), nil }
func (d *logRoot) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: ".", Err: errors.New("is a directory")}
}
func (d *logRoot) Close() error { return nil }

func (d *logRoot) ReadDir(n int) ([]fs.DirEntry, error) {
	if d.listed {
		if n > 0 {
			return nil, io.EOF
		}
		return nil, nil
	}
	d.listed = true
	return []fs.DirEntry{fs.FileInfoToDirEntry(dirInfo("pods"))}, nil
}

// dirInfo describes a directory that exists only in nodeLogFS.
type dirInfo string

func (d dirInfo) Name() string       { return string(d) }
func (d dirInfo) Size() int64        { return 0 }
func (d dirInfo) Mode() fs.FileMode  { return fs.ModeDir | 0o555 }
func (d dirInfo) ModTime() time.Time { return time.Time{} }
func (d dirInfo) IsDir() bool        { return true }
func (d dirInfo) Sys() any           { return nil }
