package zkserver

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func TestReadHeaderElection(t *testing.T) {
	t.Parallel()
	// 3.5+ form: version, sid, address length, address.
	var v1 bytes.Buffer
	binary.Write(&v1, binary.BigEndian, int64(-65536))
	binary.Write(&v1, binary.BigEndian, int64(3))
	addr := "127.0.0.1:23994"
	binary.Write(&v1, binary.BigEndian, int32(len(addr)))
	v1.WriteString(addr)
	v1.WriteString("rest")
	sid, out, err := readHeader(electionPort, &v1)
	if err != nil || sid != 3 {
		t.Fatalf("readHeader = %d, %v; want sid 3", sid, err)
	}
	// Rewritten to the 3.4 form, the sid alone, so that the receiver dials
	// back through its own zoo.cfg (the relay), not the address sent.
	if want := binary.BigEndian.AppendUint64(nil, 3); !bytes.Equal(out, want) {
		t.Errorf("forwarded %x, want %x", out, want)
	}
	if v1.String() != "rest" {
		t.Errorf("read past the header: %q left", v1.String())
	}

	old := bytes.NewReader(binary.BigEndian.AppendUint64(nil, 2))
	if sid, out, err := readHeader(electionPort, old); err != nil || sid != 2 || len(out) != 8 {
		t.Errorf("3.4 form: %d, %x, %v", sid, out, err)
	}
}

func TestReadHeaderQuorum(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	binary.Write(&b, binary.BigEndian, int32(11)) // FOLLOWERINFO
	binary.Write(&b, binary.BigEndian, int64(0x100000000))
	binary.Write(&b, binary.BigEndian, int32(20)) // LearnerInfo: sid, version, config version
	binary.Write(&b, binary.BigEndian, int64(5))
	sid, out, err := readHeader(quorumPort, bytes.NewReader(b.Bytes()))
	if err != nil || sid != 5 || !bytes.Equal(out, b.Bytes()) {
		t.Errorf("readHeader = %d, %x, %v; want 5 and the bytes unchanged", sid, out, err)
	}
	b.Reset()
	binary.Write(&b, binary.BigEndian, int32(3)) // not a learner's first packet
	b.Write(make([]byte, 20))
	if _, _, err := readHeader(quorumPort, &b); err == nil {
		t.Error("a packet other than FOLLOWERINFO/OBSERVERINFO was accepted")
	}
}
