module github.com/shardns/shardns

go 1.26.0

require github.com/miekg/dns v1.1.73

require (
	golang.org/x/net v0.59.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
