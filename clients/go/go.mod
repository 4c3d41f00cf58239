module github.com/taskgate/taskgate/clients/go

go 1.23
