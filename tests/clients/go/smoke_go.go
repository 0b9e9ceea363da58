// Go driver smoke test: handshake, topology monitoring, diagnostics and basic CRUD, with
// the official MongoDB Go driver as Debian packages it (golang-mongodb-mongo-driver-dev),
// built offline in GOPATH mode by tests/clients/run.sh.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"
	"go.mongodb.org/mongo-driver/mongo/readpref"
)

var failed = 0
var passed = 0

func check(name string, ok bool, detail interface{}) {
	if ok {
		passed++
		fmt.Printf("ok   - go: %s\n", name)
	} else {
		failed++
		fmt.Printf("FAIL - go: %s: %v\n", name, detail)
	}
}

func main() {
	uri := os.Args[1]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opts := options.Client().ApplyURI(uri).SetHeartbeatInterval(500 * time.Millisecond).SetServerSelectionTimeout(10 * time.Second)
	client, err := mongo.Connect(ctx, opts)
	if err != nil {
		fmt.Println("FAIL - go: connect:", err)
		os.Exit(1)
	}
	defer client.Disconnect(ctx)
	err = client.Ping(ctx, readpref.Primary())
	check("ping (handshake accepted)", err == nil, err)

	var hello bson.M
	err = client.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello)
	check("hello", err == nil && hello["msg"] == "isdbgrid", hello)
	tv, _ := hello["topologyVersion"].(bson.M)
	_, isInt64 := tv["counter"].(int64)
	check("topologyVersion.counter is int64", isInt64, tv)

	var bi bson.M
	err = client.Database("admin").RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&bi)
	check("buildInfo version", err == nil && bi["version"] == "7.0.0", bi["version"])

	// let the streaming monitor run a few heartbeats; the connection must stay healthy
	time.Sleep(1500 * time.Millisecond)
	err = client.Ping(ctx, readpref.Primary())
	check("ping after monitoring heartbeats", err == nil, err)

	coll := client.Database("gosmoke").Collection("c")
	_ = coll.Drop(ctx)
	_, err = coll.InsertMany(ctx, []interface{}{
		bson.D{{Key: "_id", Value: 1}, {Key: "name", Value: "one"}},
		bson.D{{Key: "_id", Value: 2}, {Key: "name", Value: "two"}},
		bson.D{{Key: "_id", Value: 3}, {Key: "name", Value: "three"}},
	})
	check("insertMany", err == nil, err)
	var one bson.M
	err = coll.FindOne(ctx, bson.D{{Key: "_id", Value: 2}}).Decode(&one)
	check("findOne by _id", err == nil && one["name"] == "two", one)
	cur, err := coll.Find(ctx, bson.D{}, options.Find().SetBatchSize(1))
	n := 0
	if err == nil {
		for cur.Next(ctx) {
			n++
		}
		err = cur.Err()
	}
	check("find iterates across getMore", err == nil && n == 3, fmt.Sprint(n, err))
	_, err = coll.InsertOne(ctx, bson.D{{Key: "_id", Value: 1}})
	we, ok := err.(mongo.WriteException)
	check("duplicate key is 11000", ok && len(we.WriteErrors) == 1 && we.WriteErrors[0].Code == 11000, err)
	err = client.Database("admin").RunCommand(ctx, bson.D{{Key: "nosuchcommand", Value: 1}}).Err()
	ce, ok := err.(mongo.CommandError)
	check("unknown command is 59", ok && ce.Code == 59, err)
	_ = coll.Drop(ctx)

	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		os.Exit(1)
	}
}
