"""The small English text the made tokenizer learns its merges from.

The made models need a byte-level BPE vocabulary that behaves like a real one (common
words become single tokens, rare words fall apart into pieces), and the merges must be
learned the same way on every machine. A fixed text kept in the package is the simplest
source that never changes under our feet. It is plain prose and a little dialogue, the
kind of text a chat application shows.
"""

CORPUS = """\
The river ran past the old mill and under the stone bridge, where the children of the
village liked to sit in the evening and watch the water. In the summer the water was low
and clear, and you could see the small fish turning in the light. In the winter it was
high and brown, and it carried branches and leaves down from the hills.

An old man named Thomas lived in the house next to the mill. He had worked there when he
was young, when the wheel still turned and the farmers brought their grain from miles
around. Now the wheel was still, and the mill was a place for birds and for stories.
Thomas knew all of the stories. He told them slowly, and he never told the same story
the same way twice.

"Tell us about the flood," said a girl one evening. Her name was Anna, and she was the
youngest of the children who came to the bridge.

"The flood," said Thomas, and he looked at the water for a long time before he spoke
again. "That was the year the rain did not stop. It rained for forty days, or that is
what my father said. I think it was fewer, but it felt like forty. The river came up over
the bridge, and then over the road, and then into the mill itself. We carried the sacks
up to the top floor, one by one, all through the night."

"Were you afraid?" asked Anna.

"Of course I was afraid. Everyone was afraid. But when you are busy, you forget to be
afraid for a while. That is one thing I learned that night. The other thing I learned is
that water always finds a way in, no matter how well you build the walls."

The children were quiet. The light was going, and the first stars were coming out over
the hills. Somewhere a dog was barking, and a door opened and closed.

A conversation is a kind of river too. It starts somewhere small and it goes where the
ground lets it go. Sometimes it splits in two, and each branch finds its own way to the
sea. If you could stand above it and look down, you would see the whole shape of it at
once: the place where it began, the places where it turned, and every path it might have
taken. Most people only ever see the part of the river they are standing in.

User: Hello! Can you help me plan a short trip to the mountains?
Assistant: Of course. How many days do you have, and do you prefer to walk or to drive?
User: I have three days, and I would like to walk as much as possible.
Assistant: Then start early on the first day and take the valley path to the lake. It is
about twelve miles, with water and shade for most of the way. On the second day you can
climb to the pass and come back before the afternoon storms. Keep the third day free, in
case the weather changes or your legs need a rest.
User: That sounds good. What should I bring?
Assistant: Good boots, a warm layer, a rain jacket, a map, more water than you think you
need, and something to eat every two hours. Tell someone where you are going and when
you expect to be back.

Numbers are words too, in their way. There were 3 bridges, 12 houses and 140 sheep in the
valley, and the bus came at 7:45 every morning except on Sunday. The price of bread went
from 1.20 to 1.35 in one year, and people talked about it for weeks.

Good writing is clear writing. Say what you mean, use the simplest word that will do the
job, and stop when you have finished. Read your work aloud: the ear finds the mistakes
that the eye passes over. When you are not sure, ask a question. When you are sure, say
it plainly and move on.

The evening grew cold, and one by one the children went home. Thomas stayed on the bridge
a little longer, listening to the river, which had been talking long before he was born
and would go on talking long after he was gone.
"""
