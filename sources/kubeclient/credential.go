package kubeclient

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CredentialField is the data key of the node-local credential's Secret.
const CredentialField = "credential"

// PublishCredential makes the node-local credential Secret ("namespace/
// name") hold credential, writing it there when it holds none or one
// accepts refuses (the replicas' keys were rotated). A replica writes once,
// at start: during a rolling restart the last replica started, which has
// the new keys, leaves its credential. It retries until it succeeds or
// ctx ends.
func PublishCredential(ctx context.Context, client *Client, secret string, credential []byte,
	accepts func([]byte) bool, logger *slog.Logger) error {
	ns, name, _ := strings.Cut(secret, "/")
	_, err := retrySecret(ctx, 2*time.Second, "cluster.nodeLocalSecret "+secret, logger.With("secret", secret),
		"writing the node-local credential", func() ([]byte, error) {
			return nil, publishCredentialOnce(ctx, client, ns, name, credential, accepts, logger)
		})
	return err
}

func publishCredentialOnce(ctx context.Context, client *Client, ns, name string, credential []byte,
	accepts func([]byte) bool, logger *slog.Logger) error {
	s := &corev1.Secret{}
	err := client.core.Get().Namespace(ns).Resource("secrets").Name(name).Do(ctx).Into(s)
	switch {
	case apierrors.IsNotFound(err):
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Data: map[string][]byte{CredentialField: credential}}
		err = client.core.Post().Namespace(ns).Resource("secrets").Body(s).Do(ctx).Into(s)
	case err == nil && !accepts(s.Data[CredentialField]):
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		s.Data[CredentialField] = credential
		// The resourceVersion read above makes this fail with a conflict
		// if another replica wrote first: the next round reads its write.
		err = client.core.Put().Namespace(ns).Resource("secrets").Name(name).Body(s).Do(ctx).Into(s)
	default:
		return err // nil: the credential there is acceptable
	}
	if err == nil {
		logger.Info("wrote the node-local credential", "secret", ns+"/"+name)
	}
	return err
}

// ReadCredential returns the node-local credential of the Secret
// ("namespace/name"), waiting until a replica has written it or ctx ends.
func ReadCredential(ctx context.Context, client *Client, secret string, logger *slog.Logger) ([]byte, error) {
	ns, name, _ := strings.Cut(secret, "/")
	return retrySecret(ctx, time.Second, "cluster.nodeLocalSecret "+secret, logger.With("secret", secret),
		"reading the node-local credential", func() ([]byte, error) {
			s := &corev1.Secret{}
			if err := client.core.Get().Namespace(ns).Resource("secrets").Name(name).Do(ctx).Into(s); err != nil {
				return nil, err
			}
			if len(s.Data[CredentialField]) == 0 {
				return nil, fmt.Errorf("the Secret has no %q yet (a replica writes it)", CredentialField)
			}
			return s.Data[CredentialField], nil
		})
}
