"""Canvas: the concept quiz as a QTI 1.2 zip, laid out as text2qti lays it out.

    imsmanifest.xml                     IMS content package, one imsqti_xmlv1p2 resource
    <assessment>/<assessment>.xml       questestinterop/assessment/section/item
    <assessment>/assessment_meta.xml    Canvas quiz settings

Numeric items are `numerical_question`s (`render_fib fibtype="Decimal"`) scored by a range
`vargte`/`varlte`. Canvas keeps 4 decimals, rounding magnitudes below 1e-4 to 0, so the range
is rounded outward to 4 decimals, the range `mha grade` accepts too (grading/scoring.py); an
answer Canvas cannot hold, or a range that would then accept a known-wrong value, is an error.
Choice items are `multiple_choice_question` or `multiple_answers_question`, with one
`respcondition` per choice for its feedback; a wrong choice's feedback names its misconception.
A multiple-answers item that is not exactly right gets partial credit with penalty, written as
per-choice conditions adding +100/n or -100/n (the rule of `mha grade` and Moodle). With
`draws`, every item with params becomes a question group (a nested section that picks 1) of
that many draws with distinct numbers. Written items are `essay_question`s, graded by hand in
Canvas (SpeedGrader), with the rubric as the question's general feedback (which Canvas also
shows the student once the quiz is submitted).
Identifiers are hashes of the quiz, item and draw, so re-exports are byte-identical.

The choices are written in the file's order and the quiz's `shuffle_answers` is on: Canvas shows
them to each student in an order of its own, as `mha` does with a course secret. An item with
`shuffle: false` gets `render_choice shuffle="No"`, QTI's mark for choices kept in order. Canvas'
classic quizzes read only the quiz-wide switch, so they shuffle such an item too
(docs/platforms.md says what to do about it).
"""
from __future__ import annotations

import hashlib
import html
from decimal import ROUND_HALF_EVEN
from xml.etree import ElementTree as ET

from ..course.generators import distinct_seeds
from ..course.model import Quiz, QuizItem, QuizKind
from ..course.quiz import DEFAULT_SEED, Draw, draw, draw_params
from ..errors import SpecError
from ..grading.scoring import MAX_CHOICES, STEP, choice_fraction, decimal, numeric_range as scoring_range
from .archive import zip_bytes
from .markup import to_html

__all__ = ["QUESTION_TYPES", "draw_seeds", "numeric_range", "rubric_html", "render"]

QUESTION_TYPES = {QuizKind.NUMERIC: "numerical_question", QuizKind.MULTIPLE_CHOICE: "multiple_choice_question",
                  QuizKind.MULTIPLE_ANSWERS: "multiple_answers_question", QuizKind.WRITTEN: "essay_question"}
_QTI_NS = {"xmlns": "http://www.imsglobal.org/xsd/ims_qtiasiv1p2",
           "xmlns:xsi": "http://www.w3.org/2001/XMLSchema-instance",
           "xsi:schemaLocation": "http://www.imsglobal.org/xsd/ims_qtiasiv1p2 "
                                 "http://www.imsglobal.org/xsd/ims_qtiasiv1p2p1.xsd"}
_META_NS = {"xmlns": "http://canvas.instructure.com/xsd/cccv1p0",
            "xmlns:xsi": "http://www.w3.org/2001/XMLSchema-instance",
            "xsi:schemaLocation": "http://canvas.instructure.com/xsd/cccv1p0 https://canvas.instructure.com/xsd/cccv1p0.xsd"}
_MANIFEST_NS = {
    "xmlns": "http://www.imsglobal.org/xsd/imsccv1p1/imscp_v1p1",
    "xmlns:lom": "http://ltsc.ieee.org/xsd/imsccv1p1/LOM/resource",
    "xmlns:imsmd": "http://www.imsglobal.org/xsd/imsmd_v1p2",
    "xmlns:xsi": "http://www.w3.org/2001/XMLSchema-instance",
    "xsi:schemaLocation": "http://www.imsglobal.org/xsd/imsccv1p1/imscp_v1p1 http://www.imsglobal.org/xsd/imscp_v1p1.xsd "
                          "http://ltsc.ieee.org/xsd/imsccv1p1/LOM/resource "
                          "http://www.imsglobal.org/profile/cc/ccv1p1/LOM/ccv1p1_lomresource_v1p0.xsd "
                          "http://www.imsglobal.org/xsd/imsmd_v1p2 http://www.imsglobal.org/xsd/imsmd_v1p2p2.xsd"}


def _ident(kind: str, *parts: object) -> str:
    return f"mha_{kind}_{hashlib.sha256('/'.join(map(str, parts)).encode()).hexdigest()[:40]}"


def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    element = ET.SubElement(parent, tag, attrs)
    if text is not None:
        element.text = text
    return element


def _xml(root: ET.Element) -> str:
    ET.indent(root, "  ")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _points(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def draw_seeds(item: QuizItem, count: int, seed: int) -> list[int]:
    """Up to `count` seeds from `seed` on whose params differ (fewer if the item has fewer)."""
    return distinct_seeds(lambda s: draw_params(item, s), count, seed)


def numeric_range(v: Draw, path: str = "quiz.yaml") -> tuple[str, str, str]:
    """(exact, low, high) as Canvas will store them: 4 decimals, the range that `mha grade` accepts
    (grading/scoring.py)."""
    item, answer = v.item, decimal(v.number)
    if answer and abs(answer) < STEP:
        raise SpecError(path, item.line, f"{item.id}: Canvas rounds {v.answer:g} to 0 (it keeps 4 decimals); "
                        "ask for the answer in other units")
    low, high = scoring_range(v.number, item.tolerance)
    for wrong in v.wrong:
        if low <= decimal(wrong.value) <= high:
            raise SpecError(path, wrong.line, f"{item.id}: Canvas keeps 4 decimals, so its range [{low}, {high}] "
                            f"would accept the known-wrong value {wrong.value:g}; widen the gap or rescale")
    return str(answer.quantize(STEP, rounding=ROUND_HALF_EVEN)), str(low), str(high)


def _feedback(item_el: ET.Element, ident: str, html: str) -> None:
    flow = _sub(_sub(item_el, "itemfeedback", ident=ident), "flow_mat")
    _sub(_sub(flow, "material"), "mattext", html, texttype="text/html")


def _display(condition: ET.Element, ident: str) -> None:
    _sub(condition, "displayfeedback", feedbacktype="Response", linkrefid=ident)


def _other(resprocessing: ET.Element, ident: str) -> None:
    condition = _sub(resprocessing, "respcondition", **{"continue": "Yes"})
    _sub(_sub(condition, "conditionvar"), "other")
    _display(condition, ident)


def _choice_feedback(choice) -> str:
    html = to_html(choice.feedback)
    if not choice.correct and choice.mistake:
        html += f"\n<p>Misconception: <code>{choice.mistake}</code></p>"
    return html


def _wrong_feedback(v: Draw) -> str:
    parts = [f"<p>If you answered {w.value:g} (misconception: <code>{w.mistake}</code>):</p>\n{to_html(w.feedback)}"
             for w in v.wrong]
    if v.hint:
        parts.append(to_html(v.hint))
    return "\n".join(parts)


def _item(parent: ET.Element, v: Draw, title: str, path: str) -> float:
    """One <item> for the draw `v`; returns its points."""
    item = v.item
    qid = _ident("question", item.id, v.seed)
    choice_ids = [_ident("choice", item.id, v.seed, c.letter) for c in v.choices]
    answer_ids = choice_ids or ([] if item.manual else [_ident("numerical", item.id, v.seed)])
    element = _sub(parent, "item", ident=qid, title=title)
    meta = _sub(_sub(element, "itemmetadata"), "qtimetadata")
    for label, entry in (("question_type", QUESTION_TYPES[item.kind]), ("points_possible", _points(item.points)),
                         ("original_answer_ids", ",".join(answer_ids)),
                         ("assessment_question_identifierref", _ident("question_ref", item.id, v.seed))):
        field = _sub(meta, "qtimetadatafield")
        _sub(field, "fieldlabel", label)
        _sub(field, "fieldentry", entry)
    presentation = _sub(element, "presentation")
    _sub(_sub(presentation, "material"), "mattext", to_html(v.prompt), texttype="text/html")
    processing = _sub(element, "resprocessing")
    _sub(_sub(processing, "outcomes"), "decvar", maxvalue="100", minvalue="0", varname="SCORE", vartype="Decimal")
    if item.manual:
        _essay(element, presentation, processing, v)
        return item.points
    if item.kind is QuizKind.NUMERIC:
        exact, low, high = numeric_range(v, path)
        fib = _sub(_sub(presentation, "response_str", ident="response1", rcardinality="Single"),
                   "render_fib", fibtype="Decimal")
        _sub(fib, "response_label", ident="answer1")
        correct = _sub(processing, "respcondition", **{"continue": "No"})
        either = _sub(_sub(correct, "conditionvar"), "or")
        _sub(either, "varequal", exact, respident="response1")
        both = _sub(either, "and")
        _sub(both, "vargte", low, respident="response1")
        _sub(both, "varlte", high, respident="response1")
        _sub(correct, "setvar", "100", action="Set", varname="SCORE")
        _display(correct, "correct_fb")
        incorrect = _wrong_feedback(v)
        if incorrect:
            _other(processing, "general_incorrect_fb")
        _feedback(element, "correct_fb", to_html(v.feedback))
        if incorrect:
            _feedback(element, "general_incorrect_fb", incorrect)
        return item.points
    cardinality = "Single" if item.kind is QuizKind.MULTIPLE_CHOICE else "Multiple"
    pinned = {} if item.shuffle else {"shuffle": "No"}  # the quiz shuffles every other item's choices
    render_choice = _sub(_sub(presentation, "response_lid", ident="response1", rcardinality=cardinality),
                         "render_choice", **pinned)
    for choice, cid in zip(v.choices, choice_ids):
        response = _sub(render_choice, "response_label", ident=cid)
        _sub(_sub(response, "material"), "mattext", to_html(choice.text), texttype="text/html")
    for cid in choice_ids:  # one condition per choice: its own feedback whatever else is chosen
        condition = _sub(processing, "respcondition", **{"continue": "Yes"})
        _sub(_sub(condition, "conditionvar"), "varequal", cid, respident="response1")
        _display(condition, f"{cid}_fb")
    correct = _sub(processing, "respcondition", **{"continue": "No"})
    conditions = _sub(correct, "conditionvar")
    if item.kind is QuizKind.MULTIPLE_CHOICE:
        _sub(conditions, "varequal", next(cid for c, cid in zip(v.choices, choice_ids) if c.correct),
             respident="response1")
    else:
        every = _sub(conditions, "and")
        for choice, cid in zip(v.choices, choice_ids):
            _sub(every if choice.correct else _sub(every, "not"), "varequal", cid, respident="response1")
    _sub(correct, "setvar", "100", action="Set", varname="SCORE")
    if item.kind is QuizKind.MULTIPLE_ANSWERS:
        _partial_credit(processing, v, choice_ids, path)
    for choice, cid in zip(v.choices, choice_ids):
        _feedback(element, f"{cid}_fb", _choice_feedback(choice))
    return item.points


def rubric_html(item: QuizItem) -> str:
    """A written item's rubric as HTML: what a grader gives points for."""
    rows = "".join(f"<li>{r.points:g} point{'' if r.points == 1 else 's'}: {html.escape(r.text)}</li>"
                   for r in item.rubric)
    return f"<p>Rubric ({item.points:g} points, graded by hand):</p>\n<ul>{rows}</ul>"


def _essay(element: ET.Element, presentation: ET.Element, processing: ET.Element, v: Draw) -> None:
    """An essay question as text2qti writes one: a free-text response, no automatic score, the
    rubric as general feedback."""
    fib = _sub(_sub(presentation, "response_str", ident="response1", rcardinality="Single"), "render_fib")
    _sub(fib, "response_label", ident="answer1", rshuffle="No")
    _sub(_sub(_sub(processing, "respcondition", **{"continue": "No"}), "conditionvar"), "other")
    _other(processing, "general_fb")
    _feedback(element, "general_fb", rubric_html(v.item))


def _partial_credit(processing: ET.Element, v: Draw, choice_ids: list[str], path: str) -> None:
    """Reached only when the answer is not exactly right: each true statement chosen adds 100/n,
    then each false one chosen adds -100/n; SCORE is bounded to 0..100 (its decvar), so the result
    is Canvas' "partial credit with penalty" and `mha grade`'s rule (grading/scoring.py). The
    positive additions come first, so bounding after each step or at the end gives the same score.
    Canvas' importer reads a positive addition as a correct choice and a negative one as a wrong
    one (its qti_exporter get_response_weight), the same split as the exact-match condition."""
    n = len(v.correct_letters)
    if n > MAX_CHOICES:
        raise SpecError(path, v.item.line, f"{v.item.id}: at most {MAX_CHOICES} true statements can get partial "
                        f"credit on every platform (got {n})")
    for wanted in (True, False):
        for choice, cid in zip(v.choices, choice_ids):
            if choice.correct is wanted:
                condition = _sub(processing, "respcondition", **{"continue": "Yes"})
                _sub(_sub(condition, "conditionvar"), "varequal", cid, respident="response1")
                _sub(condition, "setvar", _points(float(100 * choice_fraction(wanted, n))), action="Add",
                     varname="SCORE")


def _draw_title(item: QuizItem, v: Draw) -> str:
    return f"{item.title} ({', '.join(f'{k}={x}' for k, x in v.params.items())})" if v.params else item.title


def _assessment(quiz: Quiz, assessment_id: str, draws: int | None, seed: int) -> tuple[ET.Element, float]:
    path = str(quiz.path or "quiz.yaml")
    root = ET.Element("questestinterop", _QTI_NS)
    assessment = _sub(root, "assessment", ident=assessment_id, title=quiz.title)
    field = _sub(_sub(assessment, "qtimetadata"), "qtimetadatafield")
    _sub(field, "fieldlabel", "cc_maxattempts")
    _sub(field, "fieldentry", "1")
    section = _sub(assessment, "section", ident="root_section")
    total = 0.0
    for item in quiz.items:
        if draws and item.params:
            group = _sub(section, "section", ident=_ident("group", item.id, seed, draws), title=item.title)
            selection = _sub(_sub(group, "selection_ordering"), "selection")
            _sub(selection, "selection_number", "1")
            _sub(_sub(selection, "selection_extension"), "points_per_item", _points(item.points))
            for s in draw_seeds(item, draws, seed):
                v = draw(item, s, student_order=False)  # Canvas shuffles for each student
                _item(group, v, _draw_title(item, v), path)
            total += item.points
        else:
            total += _item(section, draw(item, seed, student_order=False), item.title, path)
    return root, total


def _meta(quiz: Quiz, assessment_id: str, points: float) -> ET.Element:
    quiz_el = ET.Element("quiz", {"identifier": assessment_id, **_META_NS})
    _sub(quiz_el, "title", quiz.title)
    _sub(quiz_el, "description", to_html(f"{quiz.title}: exported by mha-exercises."))
    settings = [("shuffle_answers", "true"), ("scoring_policy", "keep_highest"), ("hide_results", ""),
                ("quiz_type", "assignment"), ("points_possible", repr(float(points))),
                ("require_lockdown_browser", "false"), ("require_lockdown_browser_for_results", "false"),
                ("require_lockdown_browser_monitor", "false"), ("lockdown_browser_monitor_data", None),
                ("show_correct_answers", "true"), ("anonymous_submissions", "false"), ("could_be_locked", "false"),
                ("allowed_attempts", "1"), ("one_question_at_a_time", "false"), ("cant_go_back", "false"),
                ("available", "false"), ("one_time_results", "false"),
                ("show_correct_answers_last_attempt", "false"), ("only_visible_to_overrides", "false"),
                ("module_locked", "false")]
    for tag, text in settings:
        _sub(quiz_el, tag, text)
    course = _sub(quiz_el, "assignment", identifier=assessment_id.replace("assessment", "assignment"))
    for tag, text in [("title", quiz.title), ("due_at", None), ("lock_at", None), ("unlock_at", None),
                      ("module_locked", "false"), ("workflow_state", "unpublished"), ("assignment_overrides", ""),
                      ("quiz_identifierref", assessment_id), ("allowed_extensions", ""),
                      ("has_group_category", "false"), ("points_possible", repr(float(points))),
                      ("grading_type", "points"), ("all_day", "false"), ("submission_types", "online_quiz"),
                      ("position", "1"), ("turnitin_enabled", "false"), ("vericite_enabled", "false"),
                      ("peer_review_count", "0"), ("peer_reviews", "false"), ("automatic_peer_reviews", "false"),
                      ("anonymous_peer_reviews", "false"), ("grade_group_students_individually", "false"),
                      ("freeze_on_copy", "false"), ("omit_from_final_grade", "false"),
                      ("intra_group_peer_reviews", "false"), ("only_visible_to_overrides", "false"),
                      ("post_to_sis", "false"), ("moderated_grading", "false"), ("grader_count", "0"),
                      ("grader_comments_visible_to_graders", "true"), ("anonymous_grading", "false"),
                      ("graders_anonymous_to_graders", "false"), ("grader_names_visible_to_final_grader", "true"),
                      ("anonymous_instructor_annotations", "false")]:
        _sub(course, tag, text)
    _sub(_sub(course, "post_policy"), "post_manually", "false")
    _sub(quiz_el, "assignment_group_identifierref", assessment_id.replace("assessment", "assignment-group"))
    _sub(quiz_el, "assignment_overrides", "")
    return quiz_el


def _manifest(assessment_id: str, files: tuple[str, str]) -> ET.Element:
    """The IMS manifest, as text2qti writes it but without the export date (re-exports stay identical)."""
    manifest = ET.Element("manifest", {"identifier": assessment_id.replace("assessment", "manifest"), **_MANIFEST_NS})
    metadata = _sub(manifest, "metadata")
    _sub(metadata, "schema", "IMS Content")
    _sub(metadata, "schemaversion", "1.1.3")
    lom = _sub(metadata, "imsmd:lom")
    _sub(_sub(_sub(lom, "imsmd:general"), "imsmd:title"), "imsmd:string", "QTI assessment exported by mha-exercises")
    rights = _sub(lom, "imsmd:rights")
    _sub(_sub(rights, "imsmd:copyrightAndOtherRestrictions"), "imsmd:value", "yes")
    _sub(_sub(rights, "imsmd:description"), "imsmd:string",
         "Private (Copyrighted) - http://en.wikipedia.org/wiki/Copyright")
    _sub(manifest, "organizations")
    resources = _sub(manifest, "resources")
    dependency = assessment_id.replace("assessment", "dependency")
    resource = _sub(resources, "resource", identifier=assessment_id, type="imsqti_xmlv1p2")
    _sub(resource, "file", href=files[0])
    _sub(resource, "dependency", identifierref=dependency)
    meta = _sub(resources, "resource", identifier=dependency,
                type="associatedcontent/imscc_xmlv1p1/learning-application-resource", href=files[1])
    _sub(meta, "file", href=files[1])
    return manifest


def render(quiz: Quiz, *, draws: int | None = None, seed: int = DEFAULT_SEED) -> bytes:
    """The QTI zip. `draws`: a question group of that many draws per item with params."""
    assessment_id = _ident("assessment", quiz.title, *(i.id for i in quiz.items), seed, draws or 0)
    questions, points = _assessment(quiz, assessment_id, draws, seed)
    files = (f"{assessment_id}/{assessment_id}.xml", f"{assessment_id}/assessment_meta.xml")
    return zip_bytes({
        "imsmanifest.xml": _xml(_manifest(assessment_id, files)),
        "non_cc_assessments/": "",  # as text2qti writes it
        files[0]: _xml(questions),
        files[1]: _xml(_meta(quiz, assessment_id, points)),
    })
