// Command git-server serves the Git repositories below -root over smart HTTP
// (clone, fetch and push) by running Git's own `git http-backend` as a CGI
// program: Git speaks the protocol, this only listens and logs. It is the Git
// server of tests/cluster/flux-up.sh, reached by Flux's source-controller from
// the cluster and by the tests from the host; it has no authentication, so it
// listens only where it is told (an address inside the cluster's network
// namespace).
package main

import (
	"flag"
	"log"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

func main() {
	addr := flag.String("listen", "127.0.0.1:8080", "address to listen on")
	root := flag.String("root", "", "folder holding the bare repositories (NAME.git)")
	flag.Parse()
	if *root == "" {
		log.Fatal("git-server: -root is required")
	}
	abs, err := filepath.Abs(*root)
	if err != nil {
		log.Fatalf("git-server: %v", err)
	}
	backend, err := httpBackend()
	if err != nil {
		log.Fatalf("git-server: %v", err)
	}
	handler := &cgi.Handler{
		Path: backend,
		Env: []string{
			"GIT_PROJECT_ROOT=" + abs,
			// Every repository below root is served, and pushes are allowed
			// without a REMOTE_USER (there is no authentication here).
			"GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_COUNT=1",
			"GIT_CONFIG_KEY_0=http.receivepack",
			"GIT_CONFIG_VALUE_0=true",
			"HOME=" + os.Getenv("HOME"),
		},
	}
	mux := http.NewServeMux()
	mux.Handle("/", logged(handler))
	log.Printf("git-server: serving %s on %s with %s", abs, *addr, backend)
	log.Fatal(http.ListenAndServe(*addr, mux))
}

// httpBackend finds `git http-backend` where `git --exec-path` says Git keeps
// its helpers.
func httpBackend() (string, error) {
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		return "", err
	}
	return filepath.Join(strings.TrimSpace(string(out)), "git-http-backend"), nil
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func logged(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, req)
		log.Printf("%s %s?%s %d", req.Method, req.URL.Path, req.URL.RawQuery, rec.status)
	})
}
