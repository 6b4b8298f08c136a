package txnlog

import (
	"bytes"
	"encoding/binary"
	"hash/adler32"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// record builds one log record: checksum, length, entry, 'B'.
func record(entry []byte) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.BigEndian, uint64(adler32.Checksum(entry)))
	binary.Write(&b, binary.BigEndian, int32(len(entry)))
	b.Write(entry)
	b.WriteByte('B')
	return b.Bytes()
}

func header(session int64, cxid int32, zxid int64, typ int32) *bytes.Buffer {
	var b bytes.Buffer
	binary.Write(&b, binary.BigEndian, session)
	binary.Write(&b, binary.BigEndian, cxid)
	binary.Write(&b, binary.BigEndian, zxid)
	binary.Write(&b, binary.BigEndian, int64(1700000000000))
	binary.Write(&b, binary.BigEndian, typ)
	return &b
}

func str(b *bytes.Buffer, s string) {
	binary.Write(b, binary.BigEndian, int32(len(s)))
	b.WriteString(s)
}

func TestReadAndTail(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "log.100000001")
	var f bytes.Buffer
	binary.Write(&f, binary.BigEndian, int32(magic))
	binary.Write(&f, binary.BigEndian, int32(2))
	binary.Write(&f, binary.BigEndian, int64(0))
	del := header(7, 3, 0x100000001, TypeDelete)
	str(del, "/locks/l/_c_x-lock-0000000001")
	f.Write(record(del.Bytes()))
	f.Write(make([]byte, 64)) // preallocated zeros
	if err := os.WriteFile(path, f.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	tl := NewTailer(dir)
	defer tl.Close()
	got, err := tl.Poll()
	if err != nil || len(got) != 1 || got[0].Type != TypeDelete || got[0].Path != "/locks/l/_c_x-lock-0000000001" || got[0].Session != 7 {
		t.Fatalf("Poll = %+v, %v", got, err)
	}
	// An expiry appended in place of the zeros, with a digest after it.
	cl := header(9, 0, 0x100000002, TypeCloseSession)
	binary.Write(cl, binary.BigEndian, int32(1))
	str(cl, "/locks/l/_c_y-lock-0000000002")
	binary.Write(cl, binary.BigEndian, int32(2))
	binary.Write(cl, binary.BigEndian, int64(12345)) // TxnDigest
	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.WriteAt(record(cl.Bytes()), int64(16+len(record(del.Bytes()))))
	w.Close()
	got, err = tl.Poll()
	if err != nil || len(got) != 1 || !got[0].Expired() || len(got[0].Deleted) != 1 || got[0].Deleted[0] != "/locks/l/_c_y-lock-0000000002" {
		t.Fatalf("Poll after the append = %+v, %v", got, err)
	}
	if got, _ := tl.Poll(); len(got) != 0 {
		t.Errorf("Poll again = %+v, want nothing new", got)
	}
	r, _ := Open(path)
	defer r.Close()
	r.Next()
	r.Next()
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("at the zeros: %v, want io.EOF", err)
	}
}
