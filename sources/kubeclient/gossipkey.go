package kubeclient

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GossipKeyField is the data key of the gossip Secret.
const GossipKeyField = "key"

// GossipKey returns the content of the gossip Secret ("namespace/name"),
// data field GossipKeyField: one or more base64 keys, one per line.
//
// A deployment must be secure with no manual step, so the replicas make
// the key themselves: the first to start finds the Secret (shipped empty)
// without a key, generates 32 random bytes and writes them with the
// Secret's resourceVersion; a replica that loses that race re-reads the
// winner's key, so every replica ends with the same one. A process that
// may only read the Secret (the node-local DaemonSet) waits for a replica
// to write it. It retries until ctx ends.
func GossipKey(ctx context.Context, client *Client, secret string, logger *slog.Logger) ([]byte, error) {
	ns, name, _ := strings.Cut(secret, "/")
	return retrySecret(ctx, time.Second, "cluster.secret "+secret, logger.With("secret", secret), "reading the gossip key",
		func() ([]byte, error) { return gossipKeyOnce(ctx, client, ns, name, logger) })
}

// retrySecret calls once until it succeeds or ctx ends, every interval,
// logging each new error (a replica retries the same one for a while)
// with msg, and returns once's result, or its last error named by what.
func retrySecret(ctx context.Context, interval time.Duration, what string, logger *slog.Logger, msg string,
	once func() ([]byte, error)) ([]byte, error) {
	var last error
	for {
		b, err := once()
		if err == nil {
			return b, nil
		}
		if last == nil || err.Error() != last.Error() {
			logger.Warn(msg, "err", err)
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: %w", what, last)
		case <-time.After(interval):
		}
	}
}

func gossipKeyOnce(ctx context.Context, client *Client, ns, name string, logger *slog.Logger) ([]byte, error) {
	s := &corev1.Secret{}
	err := client.core.Get().Namespace(ns).Resource("secrets").Name(name).Do(ctx).Into(s)
	switch {
	case apierrors.IsNotFound(err):
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		s.Data = map[string][]byte{GossipKeyField: newGossipKey()}
		err = client.core.Post().Namespace(ns).Resource("secrets").Body(s).Do(ctx).Into(s)
		if err == nil {
			logger.Info("created the gossip key Secret", "secret", ns+"/"+name)
		}
	case err == nil && len(strings.TrimSpace(string(s.Data[GossipKeyField]))) == 0:
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		s.Data[GossipKeyField] = newGossipKey()
		// The resourceVersion read above makes this fail with a conflict
		// if another replica wrote first: the next round reads its key.
		err = client.core.Put().Namespace(ns).Resource("secrets").Name(name).Body(s).Do(ctx).Into(s)
		if err == nil {
			logger.Info("generated the gossip key", "secret", ns+"/"+name)
		}
	}
	if err != nil {
		return nil, err
	}
	key := s.Data[GossipKeyField]
	if len(strings.TrimSpace(string(key))) == 0 {
		return nil, fmt.Errorf("the Secret has no %q yet", GossipKeyField)
	}
	return key, nil
}

// newGossipKey is an AES-256 key, base64-encoded as in a key file.
func newGossipKey() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return []byte(base64.StdEncoding.EncodeToString(b) + "\n")
}
