// The Git server of tests/cluster/flux-up.sh: Git's own smart-HTTP backend
// (git http-backend) behind Go's net/http/cgi. Standard library only.
module gpuready.local/cluster/git-server

go 1.26.0
