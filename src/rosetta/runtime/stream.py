"""What :meth:`Agent.stream` returns: an object you iterate for the answer's text as it arrives
(``for`` or ``async for``), whose :meth:`Stream.result` (``await`` :meth:`Stream.aresult`) reads
whatever is left and returns the :class:`~rosetta.runtime.result.Result`.

Nothing starts until the stream is first read; the first read decides whether it runs blocking or
on asyncio. A reader that stops early ends the call with :meth:`Stream.close` / :meth:`Stream.aclose`
(``with`` / ``async with`` do it). Read with ``for``, dropping the stream does it too: the stream
holds its running call and nothing the call holds refers back to the stream, so the response is
closed and its endpoint slot freed as soon as the last reference goes, not whenever the garbage
collector runs (asyncio closes a dropped asynchronous one only later, from its event loop).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Generator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic

from rosetta.errors import Problem, UsageError
from rosetta.runtime.result import OutputT

if TYPE_CHECKING:
    from rosetta.runtime.result import Result


@dataclass(frozen=True)
class Finished:
    """The last item of an asynchronous text stream: what the run returned (an async generator
    cannot return a value)."""

    value: Any


TextRun = Generator[str, None, Any]
"""Text chunks, then the run's value as the generator's return value."""
AsyncTextRun = AsyncGenerator["str | Finished", None]
"""Text chunks, then one :class:`Finished`."""


class Stream(Generic[OutputT]):
    """One streamed call (see the module docstring); its Result's output is typed as the agent's."""

    def __init__(self, start: Callable[[], TextRun], astart: Callable[[], AsyncTextRun],
                 finish: Callable[[Any], Result[OutputT]], afinish: Callable[[Any], Awaitable[Result[OutputT]]]) -> None:
        self._start, self._astart = start, astart
        self._finish, self._afinish = finish, afinish
        self._text: TextRun | None = None
        self._atext: AsyncTextRun | None = None
        self._result: Result[OutputT] | None = None
        self._closed = False

    def __repr__(self) -> str:
        state = ("finished" if self._result is not None else "closed" if self._closed else
                 "reading" if self._text is not None or self._atext is not None else "not started")
        return f"<rosetta Stream, {state}>"

    # -- blocking ------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        if self._result is not None:
            raise StopIteration
        if self._text is None:
            self._check("a for loop", asynchronous=False)
            self._text = self._start()
        try:
            return next(self._text)
        except StopIteration as done:
            self._text = None
            self._result = self._finish(done.value)
            raise StopIteration from None

    def result(self) -> Result[OutputT]:
        """The Result, after reading (and discarding) the text not read yet."""
        for _ in self:
            pass
        assert self._result is not None
        return self._result

    def close(self) -> None:
        """End the call now, if it is still running: its response is closed and its slot freed."""
        self._closed = self._result is None
        text, self._text = self._text, None
        if text is not None:
            text.close()

    def __enter__(self) -> Stream[OutputT]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- asyncio -------------------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[str]:
        return self

    async def __anext__(self) -> str:
        if self._result is not None:
            raise StopAsyncIteration
        if self._atext is None:
            self._check("an async for loop", asynchronous=True)
            self._atext = self._astart()
        item = await self._atext.__anext__()
        if isinstance(item, Finished):
            atext, self._atext = self._atext, None
            await atext.aclose()
            self._result = await self._afinish(item.value)
            raise StopAsyncIteration
        return item

    async def aresult(self) -> Result[OutputT]:
        """:meth:`result` for asyncio."""
        async for _ in self:
            pass
        assert self._result is not None
        return self._result

    async def aclose(self) -> None:
        """:meth:`close` for asyncio."""
        self._closed = self._result is None
        atext, self._atext = self._atext, None
        if atext is not None:
            await atext.aclose()
        self.close()

    async def __aenter__(self) -> Stream[OutputT]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _check(self, how: str, *, asynchronous: bool) -> None:
        if self._closed:
            raise UsageError(Problem("this stream was closed before its end; its call is over",
                                     hint="start another with agent.stream(...)"))
        if (self._text if asynchronous else self._atext) is not None:
            raise UsageError(Problem(f"this stream is being read {'without' if asynchronous else 'with'} asyncio; "
                                     f"{how} cannot read it too",
                                     hint="read a stream one way: for / result(), or async for / aresult()"))
