package kubeapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"golang.org/x/sync/errgroup"
)

// KeyValue is one object to write straight into etcd: its storage key
// (/registry/<resource>/...) and its value as the apiserver reads it
// (JSON, which it decodes as readily as the protobuf it writes itself).
type KeyValue struct {
	Key   string
	Value []byte
}

// etcdTxnOps is how many puts go into one transaction: etcd's default
// --max-txn-ops.
const etcdTxnOps = 128

// etcdWriters is how many transactions are in flight at once: etcd
// commits concurrent ones in one fsync.
const etcdWriters = 4

// etcdHTTP writes to etcd; a transaction of 128 EndpointSlices is a
// quarter of a megabyte.
var etcdHTTP = &http.Client{Timeout: 60 * time.Second}

// PutInEtcd writes kvs into etcd through its JSON gateway, 128 to a
// transaction. It is for benches that need more objects than the
// apiserver creates in their time (about 100 a second on a small
// machine once it holds 50k services): the apiserver should be stopped
// meanwhile, so that it reads them all when it starts rather than one
// watch event at a time.
func (c *ControlPlane) PutInEtcd(kvs []KeyValue) error {
	var g errgroup.Group
	g.SetLimit(etcdWriters)
	for start := 0; start < len(kvs); start += etcdTxnOps {
		batch := kvs[start:min(start+etcdTxnOps, len(kvs))]
		g.Go(func() error { return c.putTxn(batch) })
	}
	return g.Wait()
}

// putTxn writes batch in one transaction of etcd's v3 API as its gateway
// serves it in JSON, whose byte fields are base64 (encoding/json's for
// []byte).
func (c *ControlPlane) putTxn(batch []KeyValue) error {
	type put struct {
		Key   []byte `json:"key"`
		Value []byte `json:"value"`
	}
	type op struct {
		Put put `json:"request_put"`
	}
	var txn struct {
		Success []op `json:"success"`
	}
	for _, kv := range batch {
		txn.Success = append(txn.Success, op{put{[]byte(kv.Key), kv.Value}})
	}
	body, err := json.Marshal(txn)
	if err != nil {
		return err
	}
	resp, err := etcdHTTP.Post(c.etcdURL+"/v3/kv/txn", "application/json", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("kubeapi: etcd transaction: %w", err)
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var result struct {
		Succeeded bool `json:"succeeded"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(reply, &result) != nil || !result.Succeeded {
		return fmt.Errorf("kubeapi: etcd transaction of %d puts from %s: %s: %.300s", len(batch), batch[0].Key, resp.Status, reply)
	}
	return nil
}

// ServiceCIDRs are the Service IP ranges the apiserver allocates from.
func (c *ControlPlane) ServiceCIDRs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg.serviceCIDRs()
}
