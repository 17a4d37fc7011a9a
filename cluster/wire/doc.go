// Package wire holds the protobuf messages replicas exchange over
// protoactor-go remote. wire.pb.go is generated from wire.proto by
// `make proto`; both are committed.
package wire
