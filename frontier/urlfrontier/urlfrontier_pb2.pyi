from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Stats(_message.Message):
    __slots__ = ("size", "inProcess", "counts", "numberOfQueues", "crawlID")
    class CountsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    SIZE_FIELD_NUMBER: _ClassVar[int]
    INPROCESS_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    NUMBEROFQUEUES_FIELD_NUMBER: _ClassVar[int]
    CRAWLID_FIELD_NUMBER: _ClassVar[int]
    size: int
    inProcess: int
    counts: _containers.ScalarMap[str, int]
    numberOfQueues: int
    crawlID: str
    def __init__(self, size: _Optional[int] = ..., inProcess: _Optional[int] = ..., counts: _Optional[_Mapping[str, int]] = ..., numberOfQueues: _Optional[int] = ..., crawlID: _Optional[str] = ...) -> None: ...

class Pagination(_message.Message):
    __slots__ = ("start", "size", "include_inactive", "crawlID", "local")
    START_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_INACTIVE_FIELD_NUMBER: _ClassVar[int]
    CRAWLID_FIELD_NUMBER: _ClassVar[int]
    LOCAL_FIELD_NUMBER: _ClassVar[int]
    start: int
    size: int
    include_inactive: bool
    crawlID: str
    local: bool
    def __init__(self, start: _Optional[int] = ..., size: _Optional[int] = ..., include_inactive: _Optional[bool] = ..., crawlID: _Optional[str] = ..., local: _Optional[bool] = ...) -> None: ...

class DeleteCrawlMessage(_message.Message):
    __slots__ = ("value", "local")
    VALUE_FIELD_NUMBER: _ClassVar[int]
    LOCAL_FIELD_NUMBER: _ClassVar[int]
    value: str
    local: bool
    def __init__(self, value: _Optional[str] = ..., local: _Optional[bool] = ...) -> None: ...

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Local(_message.Message):
    __slots__ = ("local",)
    LOCAL_FIELD_NUMBER: _ClassVar[int]
    local: bool
    def __init__(self, local: _Optional[bool] = ...) -> None: ...

class Active(_message.Message):
    __slots__ = ("state", "local")
    STATE_FIELD_NUMBER: _ClassVar[int]
    LOCAL_FIELD_NUMBER: _ClassVar[int]
    state: bool
    local: bool
    def __init__(self, state: _Optional[bool] = ..., local: _Optional[bool] = ...) -> None: ...

class Boolean(_message.Message):
    __slots__ = ("state",)
    STATE_FIELD_NUMBER: _ClassVar[int]
    state: bool
    def __init__(self, state: _Optional[bool] = ...) -> None: ...

class Long(_message.Message):
    __slots__ = ("value",)
    VALUE_FIELD_NUMBER: _ClassVar[int]
    value: int
    def __init__(self, value: _Optional[int] = ...) -> None: ...

class QueueList(_message.Message):
    __slots__ = ("values", "total", "start", "size", "crawlID")
    VALUES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    CRAWLID_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[str]
    total: int
    start: int
    size: int
    crawlID: str
    def __init__(self, values: _Optional[_Iterable[str]] = ..., total: _Optional[int] = ..., start: _Optional[int] = ..., size: _Optional[int] = ..., crawlID: _Optional[str] = ...) -> None: ...

class StringList(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, values: _Optional[_Iterable[str]] = ...) -> None: ...

class QueueWithinCrawlParams(_message.Message):
    __slots__ = ("key", "crawlID", "local")
    KEY_FIELD_NUMBER: _ClassVar[int]
    CRAWLID_FIELD_NUMBER: _ClassVar[int]
    LOCAL_FIELD_NUMBER: _ClassVar[int]
    key: str
    crawlID: str
    local: bool
    def __init__(self, key: _Optional[str] = ..., crawlID: _Optional[str] = ..., local: _Optional[bool] = ...) -> None: ...

class QueueDelayParams(_message.Message):
    __slots__ = ("key", "delay_requestable", "crawlID", "local")
    KEY_FIELD_NUMBER: _ClassVar[int]
    DELAY_REQUESTABLE_FIELD_NUMBER: _ClassVar[int]
    CRAWLID_FIELD_NUMBER: _ClassVar[int]
    LOCAL_FIELD_NUMBER: _ClassVar[int]
    key: str
    delay_requestable: int
    crawlID: str
    local: bool
    def __init__(self, key: _Optional[str] = ..., delay_requestable: _Optional[int] = ..., crawlID: _Optional[str] = ..., local: _Optional[bool] = ...) -> None: ...

class BlockQueueParams(_message.Message):
    __slots__ = ("key", "time", "crawlID", "local")
    KEY_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    CRAWLID_FIELD_NUMBER: _ClassVar[int]
    LOCAL_FIELD_NUMBER: _ClassVar[int]
    key: str
    time: int
    crawlID: str
    local: bool
    def __init__(self, key: _Optional[str] = ..., time: _Optional[int] = ..., crawlID: _Optional[str] = ..., local: _Optional[bool] = ...) -> None: ...

class GetParams(_message.Message):
    __slots__ = ("max_urls_per_queue", "max_queues", "key", "delay_requestable", "anyCrawlID", "crawlID")
    MAX_URLS_PER_QUEUE_FIELD_NUMBER: _ClassVar[int]
    MAX_QUEUES_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    DELAY_REQUESTABLE_FIELD_NUMBER: _ClassVar[int]
    ANYCRAWLID_FIELD_NUMBER: _ClassVar[int]
    CRAWLID_FIELD_NUMBER: _ClassVar[int]
    max_urls_per_queue: int
    max_queues: int
    key: str
    delay_requestable: int
    anyCrawlID: AnyCrawlID
    crawlID: str
    def __init__(self, max_urls_per_queue: _Optional[int] = ..., max_queues: _Optional[int] = ..., key: _Optional[str] = ..., delay_requestable: _Optional[int] = ..., anyCrawlID: _Optional[_Union[AnyCrawlID, _Mapping]] = ..., crawlID: _Optional[str] = ...) -> None: ...

class AnyCrawlID(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class URLItem(_message.Message):
    __slots__ = ("discovered", "known", "ID", "creation_date")
    DISCOVERED_FIELD_NUMBER: _ClassVar[int]
    KNOWN_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    CREATION_DATE_FIELD_NUMBER: _ClassVar[int]
    discovered: DiscoveredURLItem
    known: KnownURLItem
    ID: str
    creation_date: int
    def __init__(self, discovered: _Optional[_Union[DiscoveredURLItem, _Mapping]] = ..., known: _Optional[_Union[KnownURLItem, _Mapping]] = ..., ID: _Optional[str] = ..., creation_date: _Optional[int] = ...) -> None: ...

class AckMessage(_message.Message):
    __slots__ = ("ID", "status")
    class Status(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        OK: _ClassVar[AckMessage.Status]
        SKIPPED: _ClassVar[AckMessage.Status]
        FAIL: _ClassVar[AckMessage.Status]
    OK: AckMessage.Status
    SKIPPED: AckMessage.Status
    FAIL: AckMessage.Status
    ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ID: str
    status: AckMessage.Status
    def __init__(self, ID: _Optional[str] = ..., status: _Optional[_Union[AckMessage.Status, str]] = ...) -> None: ...

class URLInfo(_message.Message):
    __slots__ = ("url", "key", "metadata", "crawlID")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: StringList
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[StringList, _Mapping]] = ...) -> None: ...
    URL_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CRAWLID_FIELD_NUMBER: _ClassVar[int]
    url: str
    key: str
    metadata: _containers.MessageMap[str, StringList]
    crawlID: str
    def __init__(self, url: _Optional[str] = ..., key: _Optional[str] = ..., metadata: _Optional[_Mapping[str, StringList]] = ..., crawlID: _Optional[str] = ...) -> None: ...

class KnownURLItem(_message.Message):
    __slots__ = ("info", "refetchable_from_date")
    INFO_FIELD_NUMBER: _ClassVar[int]
    REFETCHABLE_FROM_DATE_FIELD_NUMBER: _ClassVar[int]
    info: URLInfo
    refetchable_from_date: int
    def __init__(self, info: _Optional[_Union[URLInfo, _Mapping]] = ..., refetchable_from_date: _Optional[int] = ...) -> None: ...

class DiscoveredURLItem(_message.Message):
    __slots__ = ("info",)
    INFO_FIELD_NUMBER: _ClassVar[int]
    info: URLInfo
    def __init__(self, info: _Optional[_Union[URLInfo, _Mapping]] = ...) -> None: ...

class DiscoveredBatch(_message.Message):
    __slots__ = ("ID", "items")
    ID_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    ID: str
    items: _containers.RepeatedCompositeFieldContainer[URLInfo]
    def __init__(self, ID: _Optional[str] = ..., items: _Optional[_Iterable[_Union[URLInfo, _Mapping]]] = ...) -> None: ...

class BatchAck(_message.Message):
    __slots__ = ("ID", "statuses")
    ID_FIELD_NUMBER: _ClassVar[int]
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    ID: str
    statuses: _containers.RepeatedScalarFieldContainer[AckMessage.Status]
    def __init__(self, ID: _Optional[str] = ..., statuses: _Optional[_Iterable[_Union[AckMessage.Status, str]]] = ...) -> None: ...

class LogLevelParams(_message.Message):
    __slots__ = ("package", "level", "local")
    class Level(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        TRACE: _ClassVar[LogLevelParams.Level]
        DEBUG: _ClassVar[LogLevelParams.Level]
        INFO: _ClassVar[LogLevelParams.Level]
        WARN: _ClassVar[LogLevelParams.Level]
        ERROR: _ClassVar[LogLevelParams.Level]
    TRACE: LogLevelParams.Level
    DEBUG: LogLevelParams.Level
    INFO: LogLevelParams.Level
    WARN: LogLevelParams.Level
    ERROR: LogLevelParams.Level
    PACKAGE_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    LOCAL_FIELD_NUMBER: _ClassVar[int]
    package: str
    level: LogLevelParams.Level
    local: bool
    def __init__(self, package: _Optional[str] = ..., level: _Optional[_Union[LogLevelParams.Level, str]] = ..., local: _Optional[bool] = ...) -> None: ...

class CrawlLimitParams(_message.Message):
    __slots__ = ("key", "limit", "crawlID", "local")
    KEY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    CRAWLID_FIELD_NUMBER: _ClassVar[int]
    LOCAL_FIELD_NUMBER: _ClassVar[int]
    key: str
    limit: int
    crawlID: str
    local: bool
    def __init__(self, key: _Optional[str] = ..., limit: _Optional[int] = ..., crawlID: _Optional[str] = ..., local: _Optional[bool] = ...) -> None: ...

class URLStatusRequest(_message.Message):
    __slots__ = ("url", "key", "crawlID")
    URL_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    CRAWLID_FIELD_NUMBER: _ClassVar[int]
    url: str
    key: str
    crawlID: str
    def __init__(self, url: _Optional[str] = ..., key: _Optional[str] = ..., crawlID: _Optional[str] = ...) -> None: ...

class ListUrlParams(_message.Message):
    __slots__ = ("start", "size", "key", "crawlID", "local", "filter", "ignoreCase")
    START_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    CRAWLID_FIELD_NUMBER: _ClassVar[int]
    LOCAL_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    IGNORECASE_FIELD_NUMBER: _ClassVar[int]
    start: int
    size: int
    key: str
    crawlID: str
    local: bool
    filter: str
    ignoreCase: bool
    def __init__(self, start: _Optional[int] = ..., size: _Optional[int] = ..., key: _Optional[str] = ..., crawlID: _Optional[str] = ..., local: _Optional[bool] = ..., filter: _Optional[str] = ..., ignoreCase: _Optional[bool] = ...) -> None: ...

class CountUrlParams(_message.Message):
    __slots__ = ("key", "crawlID", "filter", "ignoreCase", "local")
    KEY_FIELD_NUMBER: _ClassVar[int]
    CRAWLID_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    IGNORECASE_FIELD_NUMBER: _ClassVar[int]
    LOCAL_FIELD_NUMBER: _ClassVar[int]
    key: str
    crawlID: str
    filter: str
    ignoreCase: bool
    local: bool
    def __init__(self, key: _Optional[str] = ..., crawlID: _Optional[str] = ..., filter: _Optional[str] = ..., ignoreCase: _Optional[bool] = ..., local: _Optional[bool] = ...) -> None: ...

class PurgeUrlParams(_message.Message):
    __slots__ = ("key", "crawlID", "days")
    KEY_FIELD_NUMBER: _ClassVar[int]
    CRAWLID_FIELD_NUMBER: _ClassVar[int]
    DAYS_FIELD_NUMBER: _ClassVar[int]
    key: str
    crawlID: str
    days: int
    def __init__(self, key: _Optional[str] = ..., crawlID: _Optional[str] = ..., days: _Optional[int] = ...) -> None: ...
